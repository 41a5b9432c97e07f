package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// credentials adds the HTTP authentication to every request: basic auth (the password given,
// or read from a file at each request so that a rotated Secret needs no restart) or a bearer
// token. Nothing here is ever logged.
type credentials struct {
	username, password, passwordFile, token string
	// secret, when set, is told every password read from the file (the redactor: a rotated
	// password is kept out of messages too).
	secret func(string)
}

func (c credentials) apply(req *http.Request) error {
	switch {
	case c.token != "":
		req.Header.Set("Authorization", "Bearer "+c.token)
	case c.username != "" || c.password != "" || c.passwordFile != "":
		pass := c.password
		if c.passwordFile != "" {
			b, err := os.ReadFile(c.passwordFile)
			if err != nil {
				// The error names the file, never its content.
				return fmt.Errorf("read the Data Plane API password file: %w", err)
			}
			pass = strings.TrimRight(string(b), "\r\n")
			if c.secret != nil {
				c.secret(pass)
			}
		}
		req.SetBasicAuth(c.username, pass)
	}
	return nil
}

// transport is the HTTP transport to the Data Plane API hosts with its TLS identity: none,
// static certificate files (re-read when they change), or a SPIFFE X.509 source.
type transport struct {
	rt *http.Transport
	// refresh re-reads rotating credentials; when they changed, idle connections are closed
	// so that the next requests handshake with the new ones.
	refresh func() error
	close   func()
}

func newHTTPTransport(tlsCfg *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func newTransport(ctx context.Context, cfg *Config, log *slog.Logger) (*transport, error) {
	switch {
	case cfg.SPIFFEID != "":
		return spiffeTransport(ctx, cfg, log)
	case cfg.CACert != "" || cfg.Cert != "" || cfg.Key != "":
		files := &tlsFiles{ca: cfg.CACert, cert: cfg.Cert, key: cfg.Key}
		if _, err := files.load(); err != nil {
			return nil, err
		}
		tr := newHTTPTransport(files.config())
		return &transport{
			rt: tr,
			refresh: func() error {
				changed, err := files.load()
				if changed {
					log.Info("Data Plane API TLS files changed; new connections use them", "ca", cfg.CACert, "cert", cfg.Cert)
					tr.CloseIdleConnections()
				}
				return err
			},
			close: tr.CloseIdleConnections,
		}, nil
	}
	tr := newHTTPTransport(&tls.Config{MinVersion: tls.VersionTLS12})
	return &transport{rt: tr, refresh: func() error { return nil }, close: tr.CloseIdleConnections}, nil
}

// authorizer checks the server's SPIFFE ID: an exact ID ("spiffe://td/path"), or any member of
// a trust domain ("spiffe://td" or "td").
func authorizer(expected string) (tlsconfig.Authorizer, string, error) {
	if !strings.Contains(expected, "://") {
		td, err := spiffeid.TrustDomainFromString(expected)
		if err != nil {
			return nil, "", fmt.Errorf("--dataplane-spiffe-id %q: %w", expected, err)
		}
		return tlsconfig.AuthorizeMemberOf(td), "member of " + td.IDString(), nil
	}
	id, err := spiffeid.FromString(expected)
	if err != nil {
		return nil, "", fmt.Errorf("--dataplane-spiffe-id %q: %w", expected, err)
	}
	if id.Path() == "" {
		return tlsconfig.AuthorizeMemberOf(id.TrustDomain()), "member of " + id.TrustDomain().IDString(), nil
	}
	return tlsconfig.AuthorizeID(id), id.String(), nil
}

// spiffeTransport gets its client SVID and trust bundle from the Workload API. Every new
// connection uses the current SVID; when the source is updated (rotation), idle connections
// are closed so that the next requests handshake with the new one.
func spiffeTransport(ctx context.Context, cfg *Config, log *slog.Logger) (*transport, error) {
	authz, desc, err := authorizer(cfg.SPIFFEID)
	if err != nil {
		return nil, err
	}
	var opts []workloadapi.X509SourceOption
	if cfg.SPIFFESocket != "" {
		addr := cfg.SPIFFESocket
		if !strings.Contains(addr, "://") {
			addr = "unix://" + addr
		}
		opts = append(opts, workloadapi.WithClientOptions(workloadapi.WithAddr(addr)))
	}
	fetchCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	src, err := workloadapi.NewX509Source(fetchCtx, opts...)
	if err != nil {
		return nil, fmt.Errorf("get an X.509-SVID from the SPIFFE Workload API %s: %w", socketName(cfg.SPIFFESocket), err)
	}
	svid, err := src.GetX509SVID()
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("get an X.509-SVID from the SPIFFE Workload API: %w", err)
	}
	log.Info("SPIFFE identity for the Data Plane API", "id", svid.ID.String(), "expires", svid.Certificates[0].NotAfter, "server", desc)

	tr := newHTTPTransport(tlsconfig.MTLSClientConfig(src, src, authz))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-src.Updated():
				tr.CloseIdleConnections()
				if s, err := src.GetX509SVID(); err == nil {
					log.Info("SPIFFE SVID updated; new connections to the Data Plane API use it", "id", s.ID.String(), "expires", s.Certificates[0].NotAfter)
				}
			}
		}
	}()
	var once sync.Once
	return &transport{
		rt:      tr,
		refresh: func() error { return nil },
		close: func() {
			once.Do(func() {
				close(done)
				wg.Wait()
				src.Close()
				tr.CloseIdleConnections()
			})
		},
	}, nil
}

func socketName(s string) string {
	if s == "" {
		return "($" + workloadapi.SocketEnv + ")"
	}
	return s
}

// tlsFiles holds static TLS material read from files, re-read when their content changes: the
// CA that signs the servers' certificates and the client certificate and key.
type tlsFiles struct {
	ca, cert, key string

	mu      sync.Mutex
	caPEM   []byte
	roots   *x509.CertPool // nil: the system roots
	certPEM []byte
	keyPEM  []byte
	client  *tls.Certificate
}

// load reads the files and parses what changed. It reports whether anything changed since
// the previous successful load. On error the previous material stays in use.
func (f *tlsFiles) load() (bool, error) {
	if (f.cert == "") != (f.key == "") {
		return false, errors.New("Data Plane API TLS: --dataplane-cert and --dataplane-key go together")
	}
	var caPEM, certPEM, keyPEM []byte
	var err error
	if f.ca != "" {
		if caPEM, err = os.ReadFile(f.ca); err != nil {
			return false, fmt.Errorf("read the Data Plane API CA: %w", err)
		}
	}
	if f.cert != "" {
		if certPEM, err = os.ReadFile(f.cert); err != nil {
			return false, fmt.Errorf("read the Data Plane API client certificate: %w", err)
		}
		if keyPEM, err = os.ReadFile(f.key); err != nil {
			return false, fmt.Errorf("read the Data Plane API client key: %w", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	if !bytes.Equal(caPEM, f.caPEM) || (f.ca != "" && f.roots == nil) {
		var roots *x509.CertPool
		if f.ca != "" {
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(caPEM) {
				return false, fmt.Errorf("Data Plane API CA %s: no PEM certificate in it", f.ca)
			}
		}
		f.caPEM, f.roots, changed = caPEM, roots, true
	}
	if !bytes.Equal(certPEM, f.certPEM) || !bytes.Equal(keyPEM, f.keyPEM) {
		var client *tls.Certificate
		if f.cert != "" {
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				// A certificate written before its key: the next load, at the next handshake or
				// reload, picks the pair up once both are there.
				return false, fmt.Errorf("Data Plane API client certificate %s and key %s: %w", f.cert, f.key, err)
			}
			client = &c
		}
		f.certPEM, f.keyPEM, f.client, changed = certPEM, keyPEM, client, true
	}
	return changed, nil
}

func (f *tlsFiles) current() (*x509.CertPool, *tls.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.roots, f.client
}

// config verifies the server against the current CA (not a pool frozen at start) and presents
// the current client certificate; both are re-read at each handshake.
func (f *tlsFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is done in VerifyConnection, against the CA as it is now on disk.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, _ = f.load() // keep the last good material on a half-written rotation
			roots, _ := f.current()
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the Data Plane API server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots:         roots,
				Intermediates: inter,
				DNSName:       cs.ServerName,
				KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("verify the Data Plane API server certificate: %w", err)
			}
			return nil
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			_, _ = f.load()
			_, c := f.current()
			if c == nil {
				return &tls.Certificate{}, nil // the server decides whether it needs one
			}
			return c, nil
		},
	}
}
