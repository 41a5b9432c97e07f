package dataplane

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// live plays the generation store's live paths: the files Reload reads.
type live struct {
	config, certs string
}

func newLive(t *testing.T) *live {
	t.Helper()
	dir := t.TempDir()
	l := &live{config: filepath.Join(dir, "haproxy.cfg"), certs: filepath.Join(dir, "certs")}
	if err := os.Mkdir(l.certs, 0o700); err != nil {
		t.Fatal(err)
	}
	return l
}

// set replaces the live configuration and certificates.
func (l *live) set(t *testing.T, config string, certs map[string][]byte) {
	t.Helper()
	if err := os.WriteFile(l.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(l.certs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		os.Remove(filepath.Join(l.certs, e.Name()))
	}
	for name, pem := range certs {
		if err := os.WriteFile(filepath.Join(l.certs, name+".pem"), pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// recorder collects OnResult calls.
type recorder struct {
	mu  sync.Mutex
	got []string // "endpoint result"
}

func (r *recorder) record(endpoint, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, endpoint+" "+result)
}

func (r *recorder) count(endpoint, result string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.got {
		if g == endpoint+" "+result {
			n++
		}
	}
	return n
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

type harness struct {
	live *live
	logs *haproxytest.SyncBuffer
	res  *recorder
	r    *Reloader
}

// newHarness makes a Reloader over fresh live files with test-friendly timings; cfg gives
// the URLs and credentials.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{live: newLive(t), logs: &haproxytest.SyncBuffer{}, res: &recorder{}}
	if cfg.ConfigPath == "" {
		cfg.ConfigPath, cfg.CertDir = h.live.config, h.live.certs
	}
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.OnResult = h.res.record
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = 50*time.Millisecond, 400*time.Millisecond
	}
	cfg.PollInterval = 10 * time.Millisecond
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Second
	}
	r, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	h.r = r
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reloader logs:\n%s", h.logs.String())
		}
	})
	return h
}

// httpConfig binds "${HAPROXY_LOCALPEER}:port", so that the same text listens on each
// stand-in's own loopback address.
func httpConfig(port int, backend string, extra ...string) string {
	return fmt.Sprintf(`global
  hard-stop-after 5s
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend fe
  bind "${HAPROXY_LOCALPEER}:%d"
  default_backend be
backend be
  server s1 %s
%s`, port, backend, strings.Join(extra, ""))
}

// startHost starts a stand-in whose HAProxy listens on peer (a loopback address).
func startHost(t *testing.T, peer string, opts dataplanetest.Options) *dataplanetest.Server {
	t.Helper()
	opts.LocalPeer = peer
	if opts.RuntimeReconnect == 0 {
		// The configurations of these tests have no stats socket: the API's post-reload
		// reconnection is made short, except where a test studies it.
		opts.RuntimeReconnect = 20 * time.Millisecond
	}
	return dataplanetest.Start(t, opts)
}

func waitServes(t *testing.T, addr, body string) {
	t.Helper()
	var last string
	var lastErr error
	if err := haproxytest.Poll(15*time.Second, func() bool {
		last, lastErr = haproxytest.Get(addr)
		return lastErr == nil && last == body
	}); err != nil {
		t.Fatalf("%s does not serve %q: last %q, %v", addr, body, last, lastErr)
	}
}

func mustServe(t *testing.T, addr, body string) {
	t.Helper()
	if got, err := haproxytest.Get(addr); err != nil || got != body {
		t.Fatalf("%s serves %q (%v), want %q", addr, got, err, body)
	}
}

// requestsSince returns the stand-in's requests after the first n.
func requestsSince(s *dataplanetest.Server, n int) []string {
	return s.Requests()[n:]
}

// The loopback addresses the two stand-in hosts' HAProxy listen on (see
// dataplanetest.Options.LocalPeer): one configuration, two "machines".
const (
	peerA = "127.0.5.2"
	peerB = "127.0.5.3"
)

// peerPort returns a port that was free on both peer addresses when it was chosen.
func peerPort(t *testing.T) int {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		port := haproxytest.FreePort(t)
		ok := true
		for _, ip := range []string{peerA, peerB} {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatal("no port free on both peer addresses")
	return 0
}
