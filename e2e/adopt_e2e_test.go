package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// sidecarArgs are the flags every test sidecar of e gets: its inputs, master socket and
// endpoints, but no --haproxy-config (each test says which files it works on).
func (e *demoEnv) sidecarArgs() []string {
	return []string{
		"--source=file", "--dir", e.dir, "--master-socket", e.sock, "--reload-timeout", "20s",
		"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND", "--wait", "50ms:500ms",
		"--health-addr", e.health, "--metrics-addr", e.metrics,
	}
}

// ownInstallation writes what HAProxy runs before the sidecar arrives, beside e.cfgPath: its
// own haproxy.cfg (web.localhost's pods behind HTTP_BIND, and HTTPS_BIND with
// certs/site.pem) and the certificate. It returns the configuration and the certificate.
func ownInstallation(t *testing.T, e *demoEnv) (config string, cert []byte) {
	t.Helper()
	certDir := filepath.Join(filepath.Dir(e.cfgPath), "certs")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cert = testcert.Combined(t, "own.example")
	if err := os.WriteFile(filepath.Join(certDir, "site.pem"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	config = fmt.Sprintf(`# HAProxy's own configuration, before the sidecar
global
  hard-stop-after 30s
defaults
  mode http
  option idle-close-on-response
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend http
  bind %s
  default_backend web
frontend https
  bind %s ssl crt %s/site.pem
  default_backend web
backend web
  server web1 127.0.0.11:%d
  server web2 127.0.0.12:%d
`, e.httpAddr, os.Getenv("HTTPS_BIND"), certDir, e.port, e.port)
	if err := os.WriteFile(e.cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return config, cert
}

// adoptedGeneration returns the directory of the one adopted generation in stateDir.
func adoptedGeneration(t *testing.T, stateDir string) string {
	t.Helper()
	gens, err := filepath.Glob(filepath.Join(stateDir, "gen-*-adopted-*"))
	if err != nil || len(gens) != 1 {
		t.Fatalf("adopted generations in %s: %v %v, want one", stateDir, gens, err)
	}
	return gens[0]
}

func reloadCount(t *testing.T, p *haproxytest.Process) int {
	t.Helper()
	proc, err := reload.ParseProc(p.ShowProc(t))
	if err != nil {
		t.Fatal(err)
	}
	return proc.Reloads
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdoptRunningHAProxy: HAProxy already serves on its own haproxy.cfg and certs/site.pem
// (master-worker, master socket), under load; the sidecar started on those paths keeps them
// as the adopted generation, replaces them with its own through the generation symlinks and
// one reload, and not one request fails.
func TestAdoptRunningHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	ownConfig, ownCert := ownInstallation(t, e)
	hp := e.startHAProxy(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	if cn, err := servedCertificate(os.Getenv("HTTPS_BIND"), "web.localhost"); err != nil || cn != "own.example" {
		t.Fatalf("HAProxy's own certificate: %q %v", cn, err)
	}
	reloadsBefore := reloadCount(t, hp)

	load := loadgen.Start(e.httpAddr, "web.localhost", 8)
	logs := &haproxytest.SyncBuffer{}
	runSidecar(t, logs, append(e.sidecarArgs(), "--haproxy-config", e.cfgPath)...)
	e.waitReady(t)
	// The sidecar's own configuration serves: the api service only it routes, its certificate.
	e.waitServed(t, "api.localhost", "/v1/users", "api-1")
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		cn, err := servedCertificate(os.Getenv("HTTPS_BIND"), "web.localhost")
		return err == nil && cn == "web.localhost"
	}, "the sidecar's certificate served")
	e.settled(t)
	load.Stop()

	t.Run("no failed request", func(t *testing.T) {
		t.Logf("%d requests succeeded, %d failed", load.OK(), load.Failed())
		if load.OK() < 50 {
			t.Errorf("only %d requests succeeded: the load did not run", load.OK())
		}
		if n := load.Failed(); n != 0 {
			t.Errorf("%d requests failed while the sidecar took over; first errors: %v", n, load.Errors())
		}
	})

	t.Run("one reload", func(t *testing.T) {
		if got := reloadCount(t, hp) - reloadsBefore; got != 1 {
			t.Errorf("HAProxy reloaded %d times, want 1", got)
		}
		if got := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`); got != 1 {
			t.Errorf("%v reloads counted, want 1", got)
		}
	})

	t.Run("the adopted files are kept in the state directory, and said where", func(t *testing.T) {
		stateDir := filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar")
		gen := adoptedGeneration(t, stateDir)
		if got := readString(t, filepath.Join(gen, "haproxy.cfg")); got != ownConfig {
			t.Errorf("adopted haproxy.cfg:\n%s\nwant:\n%s", got, ownConfig)
		}
		if got := readString(t, filepath.Join(gen, "certs", "site.pem")); got != string(ownCert) {
			t.Error("adopted certs/site.pem differs from HAProxy's own")
		}
		if !strings.Contains(logs.String(), "adopted generation") || !strings.Contains(logs.String(), gen) {
			t.Errorf("the adoption is not logged with %s:\n%s", gen, logs.String())
		}
		for _, p := range []string{e.cfgPath, filepath.Join(filepath.Dir(e.cfgPath), "certs")} {
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is not the generations' symlink: %v %v", p, fi, err)
			}
		}
	})
}

// TestAdoptedGenerationIsTheRollbackTarget: when the sidecar's first reload is refused (a
// port HAProxy cannot bind, which haproxy -c does not see), the files go back to HAProxy's
// own, which keeps serving; once the input is fixed the sidecar's configuration goes live.
func TestAdoptedGenerationIsTheRollbackTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	ownConfig, ownCert := ownInstallation(t, e)
	e.startHAProxy(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	held := haproxytest.Backend(t, "held")
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "frontend http\n", "frontend http\n      bind "+held+"\n", 1)
	})
	runSidecar(t, io.Discard, append(e.sidecarArgs(), "--haproxy-config", e.cfgPath)...)
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		return e.metric(t, `haproxy_sidecar_rejected_total{stage="reload"}`) >= 1
	}, "the refused reload is reported")

	if got := readString(t, e.cfgPath); got != ownConfig {
		t.Fatalf("after the rollback %s reads:\n%s\nwant HAProxy's own configuration", e.cfgPath, got)
	}
	if got := readString(t, filepath.Join(filepath.Dir(e.cfgPath), "certs", "site.pem")); got != string(ownCert) {
		t.Fatal("after the rollback certs/site.pem is not HAProxy's own")
	}
	if code, r := e.readyz(t); code == 200 || r.Ready {
		t.Fatalf("/readyz %d %+v: nothing of the sidecar's is live", code, r)
	}
	if code, body, _, err := e.get("web.localhost", "/"); err != nil || code != 200 || !strings.HasPrefix(body, "web-") {
		t.Fatalf("HAProxy's own configuration stopped serving: %d %q %v", code, body, err)
	}

	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "      bind "+held+"\n", "", 1)
	})
	e.waitReady(t)
	e.waitServed(t, "api.localhost", "/v1/users", "api-1")
}
