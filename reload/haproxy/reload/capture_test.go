package reload

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// captureEnv=1 makes TestCaptureMasterCLI write the master CLI answers of the haproxy in PATH
// into testdata/haproxy-<branch>/, the files TestCapturedAnswers reads:
//
//	HAPROXY_SIDECAR_CAPTURE=1 go test ./reload -run TestCaptureMasterCLI
//
// (with each version's bin/ from hack/haproxy-versions.sh first in PATH).
const captureEnv = "HAPROXY_SIDECAR_CAPTURE"

func TestCaptureMasterCLI(t *testing.T) {
	if os.Getenv(captureEnv) != "1" {
		t.Skipf("set %s=1 to capture this HAProxy's answers into testdata", captureEnv)
	}
	v := haproxytest.InstalledVersion(t)
	out := filepath.Join("testdata", "haproxy-"+v.Branch())
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := haproxytest.ShortTempDir(t)
	cfg := filepath.Join(dir, "haproxy.cfg")
	bin := haproxytest.Binary(t)
	save := func(name, text string) {
		t.Helper()
		// Stable paths: the files are read by tests on other machines.
		text = strings.ReplaceAll(text, dir, "/etc/haproxy")
		text = strings.ReplaceAll(text, bin, "/usr/sbin/haproxy")
		if err := os.WriteFile(filepath.Join(out, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port, tcpPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	backend := haproxytest.Backend(t, "x")
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backend, ""))
	p := haproxytest.Start(t, cfg)
	m := &MasterSocket{Path: p.MasterSocket}
	ctx := context.Background()
	cmd := func(c string) string {
		t.Helper()
		var out string
		err := haproxytest.Poll(10*time.Second, func() bool {
			var err error
			out, err = m.Command(ctx, c)
			// 2.6 drops the connection of a reload without answering.
			return err == nil || c == "reload" && cli.Dropped(err)
		})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		return out
	}
	// settle waits for the outcome of a reload whose answer does not tell (2.6).
	settle := func(before int) {
		t.Helper()
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			pr, err := m.ShowProc(ctx)
			return err == nil && pr.Reloads > before
		}, "the reload counter moves")
	}

	save("show-proc-start.txt", cmd("show proc"))
	save("reload-ok.txt", cmd("reload"))
	settle(0)
	save("show-proc-after-reload.txt", cmd("show proc"))

	// haproxy -c accepts a bind on a port someone else holds; the reload fails.
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backend, "frontend clash\n  bind "+held.Addr().String()+"\n  default_backend be\n"))
	save("reload-bind-clash.txt", cmd("reload"))
	settle(1)
	save("show-proc-after-failed-reload.txt", cmd("show proc"))
	save("startup-logs-after-failed-reload.txt", cmd("show startup-logs"))
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backend, "frobnicate\n"))
	save("reload-syntax-error.txt", cmd("reload"))
	settle(2)

	// A reload asked while the worker of another one is still starting (a large configuration
	// makes that last long enough to be sure to ask in time).
	var big strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&big, "backend b%d\n  server s 127.0.0.1:9\n", i)
	}
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backend, big.String()))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cmd("reload") }()
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		pr, err := m.ShowProc(ctx)
		return err == nil && pr.Reloads > 3
	}, "the big reload begins")
	if v.AtLeast(3, 1) {
		save("reload-busy.txt", cmd("reload"))
	}
	wg.Wait()

	// An old worker: a connection held across a reload.
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := held.Accept(); err == nil {
			accepted <- c
		}
	}()
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backend, fmt.Sprintf(
		"frontend tcpfe\n  mode tcp\n  bind 127.0.0.1:%d\n  default_backend held\nbackend held\n  mode tcp\n  server s1 %s\n", tcpPort, held.Addr())))
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the held connection never reached its backend")
	}
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	save("show-proc-old-worker.txt", cmd("show proc"))
	t.Logf("captured HAProxy %s into %s", v, out)
}
