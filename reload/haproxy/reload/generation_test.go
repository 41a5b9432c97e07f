package reload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

func certFor(t *testing.T, cn string) []byte { return testcert.Combined(t, cn) }

// servedCN returns the common name of the certificate HAProxy presents on addr.
func servedCN(addr string) (string, error) { return testcert.ServedCN(addr, "") }

// The whole apply path with real files: HAProxy runs on the stable ConfigPath symlink, a new
// generation (config and certificate together) goes live by Activate, and Reload confirms it;
// a generation that fails to load is rolled back while the old workers keep serving.
func TestGenerationsWithHAProxy(t *testing.T) {
	haproxytest.Binary(t)
	root := t.TempDir()
	store, err := generation.Open(filepath.Join(root, "haproxy.cfg"), filepath.Join(root, "ssl"), "")
	if err != nil {
		t.Fatal(err)
	}
	httpPort, tlsPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	httpAddr, tlsAddr := fmt.Sprintf("127.0.0.1:%d", httpPort), fmt.Sprintf("127.0.0.1:%d", tlsPort)
	config := func(backend, extra string) []byte {
		return []byte(haproxytest.HTTPConfig(httpPort, backend, fmt.Sprintf(
			"frontend tls\n  mode tcp\n  bind 127.0.0.1:%d ssl crt %s/site.pem\n  default_backend be\n%s", tlsPort, store.SSLDir(), extra)))
	}
	ctx := context.Background()
	check := validate.Checker{}
	apply := func(cfg []byte, cn string) *generation.Generation {
		g, err := store.Stage(cfg, map[string][]byte{"site": certFor(t, cn)}, "")
		if err != nil {
			t.Fatal(err)
		}
		path, err := store.CheckFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if err := check.Check(ctx, path); err != nil {
			t.Fatalf("haproxy -c on the staged generation: %v", err)
		}
		if err := store.Activate(g); err != nil {
			t.Fatal(err)
		}
		return g
	}

	apply(config(haproxytest.Backend(t, "backend A"), ""), "one.example")
	p := haproxytest.Start(t, store.ConfigPath())
	m := &MasterSocket{Path: p.MasterSocket}
	haproxytest.WaitFor(t, 5*time.Second, func() bool {
		b, err := haproxytest.Get(httpAddr)
		return err == nil && b == "backend A"
	}, "HAProxy serving generation 1")
	if cn, err := servedCN(tlsAddr); err != nil || cn != "one.example" {
		t.Fatalf("generation 1 certificate: %q %v", cn, err)
	}

	g2 := apply(config(haproxytest.Backend(t, "backend B"), ""), "two.example")
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	good := g2 // the last generation HAProxy loaded
	if b := get(t, httpAddr); b != "backend B" {
		t.Fatalf("generation 2 serves %q", b)
	}
	if cn, err := servedCN(tlsAddr); err != nil || cn != "two.example" {
		t.Fatalf("generation 2 certificate: %q %v", cn, err)
	}

	// Generation 3 passes haproxy -c but cannot bind.
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	apply(config(haproxytest.Backend(t, "backend C"), "frontend clash\n  bind "+holder.Addr().String()+"\n  default_backend be\n"), "three.example")
	var failed *Failed
	if err := m.Reload(ctx); !errors.As(err, &failed) {
		t.Fatalf("Reload of generation 3 = %v, want *Failed", err)
	}
	if err := store.Rollback(good); err != nil {
		t.Fatal(err)
	}
	if store.Live().Dir != g2.Dir {
		t.Fatalf("after Rollback, live is %s", store.Live().Dir)
	}
	if b := get(t, httpAddr); b != "backend B" {
		t.Fatalf("after the failed reload, HAProxy serves %q", b)
	}
	if cn, err := servedCN(tlsAddr); err != nil || cn != "two.example" {
		t.Fatalf("after the failed reload, certificate %q %v", cn, err)
	}
	// Reloading the rolled-back files succeeds and clears the failed counter.
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if proc, err := m.ShowProc(ctx); err != nil || proc.Failed != 0 {
		t.Fatalf("after reloading the rolled-back generation: %+v %v", proc, err)
	}
	if b := get(t, httpAddr); b != "backend B" {
		t.Fatalf("after reloading the rolled-back generation, HAProxy serves %q", b)
	}
	if err := store.Prune(good); err != nil {
		t.Fatal(err)
	}
	gens, err := store.Generations()
	if err != nil || len(gens) != 1 || gens[0].Dir != g2.Dir {
		t.Fatalf("after Prune: %v %v", gens, err)
	}
}
