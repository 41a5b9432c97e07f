package watcher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

// Keepalive of the connection to etcd: a peer that stops answering pings is dropped and
// redialled. etcd refuses pings more often than every 5 s (--grpc-keepalive-min-time).
const (
	etcdKeepAliveTime    = 10 * time.Second
	etcdKeepAliveTimeout = 5 * time.Second
)

// clientConfig builds the etcd client configuration: TLS from the PEM files, keepalives, and a
// reconnection backoff capped at etcdReconnectMax (gRPC's default grows to 2 minutes, which
// would delay the recovery after an outage by as much).
func clientConfig(cfg EtcdConfig, logger *zap.Logger) (clientv3.Config, error) {
	tlsCfg, err := tlsConfig(cfg)
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  tlsCfg,
		Username:             cfg.Username,
		Password:             cfg.Password,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    etcdKeepAliveTime,
		DialKeepAliveTimeout: etcdKeepAliveTimeout,
		// Large pages of pods: a page of 1,000 pods with managedFields is a few MB.
		MaxCallRecvMsgSize: 64 << 20,
		Logger:             logger,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  250 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   min(etcdReconnectMax, cfg.MaxBackoff),
			},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	}, nil
}

// tlsConfig returns nil for plain HTTP endpoints without TLS files, else a configuration that
// trusts CACert (the system roots without it) and presents the client certificate, reloaded
// when its files change (kubeadm renews etcd client certificates).
func tlsConfig(cfg EtcdConfig) (*tls.Config, error) {
	https := false
	for _, ep := range cfg.Endpoints {
		if strings.HasPrefix(ep, "https://") {
			https = true
		}
	}
	if !https && cfg.CACert == "" && cfg.Cert == "" && cfg.Key == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pem, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("read the etcd CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the etcd CA file %s holds no PEM certificate", cfg.CACert)
		}
		t.RootCAs = pool
	}
	switch {
	case cfg.Cert != "" && cfg.Key != "":
		kp := &keyPair{certFile: cfg.Cert, keyFile: cfg.Key}
		if _, err := kp.get(); err != nil {
			return nil, err
		}
		t.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	case cfg.Cert != "" || cfg.Key != "":
		return nil, errors.New("the etcd client certificate and key go together: give both or neither")
	}
	return t, nil
}

// keyPair is a client certificate read from files, read again when their modification times
// change.
type keyPair struct {
	certFile, keyFile string

	mu          sync.Mutex
	cert        *tls.Certificate
	certMod     time.Time
	keyMod      time.Time
	certSz, kSz int64
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, cerr := os.Stat(k.certFile)
	ks, kerr := os.Stat(k.keyFile)
	if cerr == nil && kerr == nil && k.cert != nil &&
		cs.ModTime().Equal(k.certMod) && ks.ModTime().Equal(k.keyMod) && cs.Size() == k.certSz && ks.Size() == k.kSz {
		return k.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // mid-rotation: keep the one that worked
		}
		return nil, fmt.Errorf("load the etcd client certificate: %w", err)
	}
	k.cert = &pair
	if cerr == nil && kerr == nil {
		k.certMod, k.keyMod, k.certSz, k.kSz = cs.ModTime(), ks.ModTime(), cs.Size(), ks.Size()
	}
	return k.cert, nil
}

// clientLog receives the etcd client's log (zap) and passes it to slog at debug level. It also
// keeps the last error the client logged: its retries hide the cause of a failed request (a
// TLS handshake failure, a refused connection) behind "context deadline exceeded".
type clientLog struct {
	log    *slog.Logger
	fields []zapcore.Field

	last *lastError
}

// lastError keeps the last few distinct errors (a refused TLS handshake shows up as
// "certificate required" on one attempt and "broken pipe" on the next).
type lastError struct {
	mu   sync.Mutex
	msgs []string
	at   time.Time
}

const keptClientErrors = 3

func (l *lastError) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) > time.Minute {
		l.msgs = nil
	}
	l.at = time.Now()
	if i := slices.Index(l.msgs, msg); i >= 0 {
		l.msgs = slices.Delete(l.msgs, i, i+1)
	}
	l.msgs = append(l.msgs, msg)
	if len(l.msgs) > keptClientErrors {
		l.msgs = l.msgs[len(l.msgs)-keptClientErrors:]
	}
}

func newClientLog(log *slog.Logger) *clientLog {
	return &clientLog{log: log, last: &lastError{}}
}

func (c *clientLog) zap() *zap.Logger { return zap.New(c) }

// recent returns the last distinct errors the client logged, if the latest is within d.
func (c *clientLog) recent(d time.Duration) string {
	c.last.mu.Lock()
	defer c.last.mu.Unlock()
	if len(c.last.msgs) == 0 || time.Since(c.last.at) > d {
		return ""
	}
	return strings.Join(c.last.msgs, "; ")
}

func (c *clientLog) Enabled(zapcore.Level) bool { return true }

func (c *clientLog) With(fields []zapcore.Field) zapcore.Core {
	cp := *c
	cp.fields = append(append([]zapcore.Field(nil), c.fields...), fields...)
	return &cp
}

func (c *clientLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *clientLog) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fields...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, k, v)
		if k == "error" && e.Level >= zapcore.WarnLevel {
			c.last.add(fmt.Sprint(v))
		}
	}
	c.log.Log(context.Background(), slog.LevelDebug, "etcd client: "+e.Message, attrs...)
	return nil
}

func (c *clientLog) Sync() error { return nil }
