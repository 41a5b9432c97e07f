package runtimeapi

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

func selfSigned(t *testing.T, cn string) []byte { return testcert.Combined(t, cn) }

// servedCN connects with TLS (SNI sni) and returns the common name of the certificate served.
func servedCN(addr, sni string) (string, error) { return testcert.ServedCN(addr, sni) }

// rig is a real HAProxy whose configuration and certificates a test rewrites.
type rig struct {
	dir, ssl, cfgPath     string
	http, https, httpsDir string
	backends              map[string]string // name -> addr
	proc                  *haproxytest.Process
	stats                 string
}

func (r *rig) config(servers []string, bindFiles []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    stats socket %s mode 600 level admin\n    hard-stop-after 5s\n\n", r.stats)
	b.WriteString("defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    default-server inter 1s fall 2 rise 1\n\n")
	fmt.Fprintf(&b, "frontend fe\n    bind %s\n    bind %s ssl", r.http, r.https)
	for _, f := range bindFiles {
		fmt.Fprintf(&b, " crt %s/%s", r.ssl, f)
	}
	fmt.Fprintf(&b, "\n    bind %s ssl crt %s/\n    default_backend be\n\nbackend be\n    balance roundrobin\n", r.httpsDir, r.ssl)
	for _, s := range servers {
		fmt.Fprintf(&b, "    server %s %s check\n", s, r.backends[s])
	}
	return []byte(b.String())
}

// write puts the files on disk as the generation swap would.
func (r *rig) write(t *testing.T, config []byte, certs map[string][]byte) {
	t.Helper()
	entries, _ := os.ReadDir(r.ssl)
	for _, e := range entries {
		os.Remove(filepath.Join(r.ssl, e.Name()))
	}
	for name, pem := range certs {
		if err := os.WriteFile(filepath.Join(r.ssl, name+".pem"), pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r.cfgPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newRig(t *testing.T) *rig {
	haproxytest.Binary(t)
	dir := haproxytest.ShortTempDir(t)
	r := &rig{dir: dir, ssl: filepath.Join(dir, "certs"), cfgPath: filepath.Join(dir, "haproxy.cfg"), stats: filepath.Join(dir, "stats.sock"),
		backends: map[string]string{}}
	if err := os.Mkdir(r.ssl, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s1", "s2", "s3"} {
		r.backends[n] = haproxytest.Backend(t, n)
	}
	r.http = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	r.https = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	r.httpsDir = fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	return r
}

// startRig starts HAProxy on a rig's configuration of server s1 and certificate a.pem, and
// returns them.
func startRig(t *testing.T) (r *rig, cfg []byte, certs map[string][]byte) {
	t.Helper()
	r = newRig(t)
	certs = map[string][]byte{"a": selfSigned(t, "a.test")}
	cfg = r.config([]string{"s1"}, []string{"a.pem"})
	r.write(t, cfg, certs)
	r.proc = haproxytest.Start(t, r.cfgPath)
	return r, cfg, certs
}

// seen sends requests until every server in want answered, and fails on an answer from another.
func (r *rig) servedBy(t *testing.T, want ...string) {
	t.Helper()
	got := map[string]bool{}
	ok := map[string]bool{}
	for _, w := range want {
		ok[w] = true
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		body, err := haproxytest.Get(r.http)
		if err != nil {
			return false
		}
		if !ok[body] {
			t.Fatalf("answered by %q, want only %q", body, want)
		}
		got[body] = true
		return len(got) == len(want)
	}, fmt.Sprintf("traffic reaches %q", want))
}

// TestUpdaterOnRealHAProxy applies plans to a real HAProxy 2.6, through the master socket and
// through a stats socket: servers added, changed, removed, certificates replaced, added to and
// removed from a directory, with no reload; then a reload of the files written loads the same.
func TestUpdaterOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	for _, via := range []string{"master socket", "stats socket"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t)
			certs := map[string][]byte{"a": selfSigned(t, "a.test"), "b": selfSigned(t, "b.test")}
			cfg := r.config([]string{"s1"}, []string{"a.pem"})
			r.write(t, cfg, certs)
			r.proc = haproxytest.Start(t, r.cfgPath)
			var opts Options
			if via == "master socket" {
				opts = Options{Client: &Socket{Path: r.proc.MasterSocket}, Prefix: "@1 "}
			} else {
				opts = Options{Client: &Socket{Path: r.stats}}
			}
			opts.SSLDir = r.ssl
			opts.Logger = slog.New(slog.DiscardHandler)
			u := track(New(opts))
			u.Reloaded(u.Plan(cfg, certs, nil))
			r.servedBy(t, "s1")

			apply := func(t *testing.T, servers, bindFiles []string, certs map[string][]byte) {
				t.Helper()
				cfg := r.config(servers, bindFiles)
				p := u.Plan(cfg, certs, nil)
				if p.Reload() != "" {
					t.Fatalf("reload asked: %s", p.Reload())
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatal(err)
				}
				r.write(t, cfg, certs)
			}
			t.Run("servers added", func(t *testing.T) {
				apply(t, []string{"s1", "s2", "s3"}, []string{"a.pem"}, certs)
				r.servedBy(t, "s1", "s2", "s3")
			})
			t.Run("server removed", func(t *testing.T) {
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				r.servedBy(t, "s1", "s3")
				// s2 served the last request: when its connection has not closed yet, HAProxy
				// refuses the del server and s2 is kept as a zombie that Tidy deletes later.
				haproxytest.WaitFor(t, 10*time.Second, func() bool { return u.Tidy(ctx) == 0 }, "Tidy has nothing left")
				if out, _ := r.proc.Command("@1 show servers state be"); strings.Contains(out, " s2 ") {
					t.Fatalf("s2 still in HAProxy:\n%s", out)
				}
			})
			t.Run("server address changed", func(t *testing.T) {
				// s3 now points at s2's backend: same name, new address.
				r.backends["s3"], r.backends["s2"] = r.backends["s2"], r.backends["s3"]
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				r.servedBy(t, "s1", "s2")
			})
			t.Run("certificate replaced", func(t *testing.T) {
				certs = map[string][]byte{"a": selfSigned(t, "a2.test"), "b": certs["b"]}
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				if cn, err := servedCN(r.https, "x.test"); err != nil || cn != "a2.test" {
					t.Fatalf("served %q (%v), want a2.test", cn, err)
				}
			})
			t.Run("certificate added to a directory", func(t *testing.T) {
				certs = map[string][]byte{"a": certs["a"], "b": certs["b"], "c": selfSigned(t, "c.test")}
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				if cn, err := servedCN(r.httpsDir, "c.test"); err != nil || cn != "c.test" {
					t.Fatalf("served %q (%v), want c.test", cn, err)
				}
			})
			t.Run("certificate removed from a directory", func(t *testing.T) {
				certs = map[string][]byte{"a": certs["a"], "b": certs["b"]}
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				if cn, err := servedCN(r.httpsDir, "c.test"); err != nil || cn == "c.test" {
					t.Fatalf("served %q (%v) after c was removed", cn, err)
				}
			})
			t.Run("150 servers added and removed in batches", func(t *testing.T) {
				names := []string{"s1", "s3"}
				for i := 0; i < 150; i++ {
					n := fmt.Sprintf("extra-%03d", i)
					r.backends[n] = r.backends["s1"]
					names = append(names, n)
				}
				apply(t, names, []string{"a.pem"}, certs)
				out, _ := r.proc.Command("@1 show servers state be")
				if got := strings.Count(out, " extra-"); got != 150 {
					t.Fatalf("%d extra servers in HAProxy, want 150", got)
				}
				apply(t, []string{"s1", "s3"}, []string{"a.pem"}, certs)
				out, _ = r.proc.Command("@1 show servers state be")
				if got := strings.Count(out, " extra-"); got != 0 {
					t.Fatalf("%d extra servers left in HAProxy", got)
				}
				r.servedBy(t, "s1", "s2")
			})
			t.Run("no reload happened, and a reload loads the same", func(t *testing.T) {
				proc, err := reload.ParseProc(r.proc.ShowProc(t))
				if err != nil || proc.Reloads != 0 {
					t.Fatalf("reloads %d (%v), want 0", proc.Reloads, err)
				}
				if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
					t.Fatal(err)
				}
				r.servedBy(t, "s1", "s2")
				if cn, err := servedCN(r.https, "x.test"); err != nil || cn != "a2.test" {
					t.Fatalf("after the reload: served %q (%v), want a2.test", cn, err)
				}
			})
		})
	}
}

// TestUpdaterRefusedCommandsOnRealHAProxy: what HAProxy refuses comes back as an error (the
// pipeline then reloads).
func TestUpdaterRefusedCommandsOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	ctx := context.Background()
	r, cfg, certs := startRig(t)
	u := track(New(Options{Client: &Socket{Path: r.proc.MasterSocket}, Prefix: "@1 ", SSLDir: r.ssl, Logger: slog.New(slog.DiscardHandler)}))
	t.Run("a PEM HAProxy cannot load", func(t *testing.T) {
		u.Reloaded(u.Plan(cfg, certs, nil))
		p := u.Plan(cfg, map[string][]byte{"a": []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")}, nil)
		if err := u.Apply(ctx, p); err == nil {
			t.Fatal("no error")
		}
		if cn, err := servedCN(r.https, "x.test"); err != nil || cn != "a.test" {
			t.Fatalf("served %q (%v), want a.test still", cn, err)
		}
	})
	t.Run("a weight on a static algorithm", func(t *testing.T) {
		static := []byte(strings.Replace(string(cfg), "balance roundrobin", "balance static-rr", 1))
		r.write(t, static, certs)
		if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
			t.Fatal(err)
		}
		u.Reloaded(u.Plan(static, certs, nil))
		p := u.Plan([]byte(strings.Replace(string(static), "check\n", "check weight 30\n", 1)), certs, nil)
		if p.Reload() != "" {
			t.Fatal(p.Reload())
		}
		if err := u.Apply(ctx, p); err == nil {
			t.Fatal("no error")
		} else {
			t.Log(err)
		}
	})
	t.Run("a reload behind the sidecar's back", func(t *testing.T) {
		r.write(t, cfg, certs)
		if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
			t.Fatal(err)
		}
		u.Reloaded(u.Plan(cfg, certs, nil))
		two := r.config([]string{"s1", "s2"}, []string{"a.pem"})
		if err := u.Apply(ctx, u.Plan(two, certs, nil)); err != nil {
			t.Fatal(err)
		}
		if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
			t.Fatal(err)
		}
		err := u.Apply(ctx, u.Plan(r.config([]string{"s1", "s2", "s3"}, []string{"a.pem"}), certs, nil))
		if err == nil || !strings.Contains(err.Error(), "worker changed") {
			t.Fatalf("error %v", err)
		}
	})
}
