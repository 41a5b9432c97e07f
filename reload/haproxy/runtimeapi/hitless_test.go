package runtimeapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// backendAt starts an HTTP server on ip:port (port 0: any) that answers body, and returns its
// address, or "" when that address is taken. Loopback answers on all of 127.0.0.0/8, so an
// address change can be a change of IP.
func backendAt(t *testing.T, ip string, port int, body string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		if port != 0 {
			return ""
		}
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// backends starts n+1 backends answering "b0" to "b<n>": b<i> for an odd i has the address of
// b<i-1> with the next IP, for an even i a new port.
func backends(t *testing.T, n int) []string {
	addrs := []string{backendAt(t, "127.0.0.1", 0, "b0")}
	ip := 1
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf("b%d", i)
		_, port, _ := net.SplitHostPort(addrs[i-1])
		if i%2 == 0 {
			addrs = append(addrs, backendAt(t, fmt.Sprintf("127.0.0.%d", ip), 0, body))
			continue
		}
		a := ""
		for tries := 0; a == "" && tries < 20; tries++ { // the port may be taken on an IP
			ip++
			a = backendAt(t, fmt.Sprintf("127.0.0.%d", ip), atoi(port), body)
		}
		if a == "" {
			t.Fatalf("no IP of 127.0.0.0/8 has port %s free", port)
		}
		addrs = append(addrs, a)
	}
	return addrs
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestAddressChangesUnderLoadFailNoRequest: the only server of a backend changes address and
// port 30 times (alternately), through the runtime API of a real HAProxy, under a load of one
// new connection per request: no request fails, each new backend answers right after its
// change, and HAProxy is never reloaded. With `set server ... state maint` around the change
// (what the sidecar did before), the same run gave 6-10 answers 503.
func TestAddressChangesUnderLoadFailNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	cases := []struct {
		name string
		// server writes the server line for backend i at addr: the same server changing
		// address, or (as the default template names servers pod-port) a new server for a new
		// port, added before the old one is removed.
		server func(i int, addr string) string
	}{
		{name: "one server, new address or port", server: func(_ int, addr string) string { return "server web-0 " + addr + " check" }},
		{name: "server named by its port, replaced", server: func(i int, addr string) string {
			_, port, _ := net.SplitHostPort(addr)
			return "server web-0-" + port + " " + addr + " check"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := haproxytest.ShortTempDir(t)
			front := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
			// Backend i answers "b<i>"; odd changes move to the next IP, even ones to a new port.
			addrs := backends(t, 30)
			config := func(i int) []byte {
				return fmt.Appendf(nil, `global
    hard-stop-after 5s
defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    default-server inter 2s fall 3 rise 2
frontend fe
    bind %s
    default_backend be
backend be
    balance roundrobin
    %s
`, front, c.server(i, addrs[i]))
			}
			path := filepath.Join(dir, "haproxy.cfg")
			if err := os.WriteFile(path, config(0), 0o600); err != nil {
				t.Fatal(err)
			}
			proc := haproxytest.Start(t, path)
			u := track(New(Options{Client: &Socket{Path: proc.MasterSocket}, Prefix: "@1 ", Logger: slog.New(slog.DiscardHandler)}))
			u.Reloaded(u.Plan(config(0), nil, nil))
			haproxytest.WaitFor(t, 10*time.Second, func() bool { b, _ := haproxytest.Get(front); return b == "b0" }, "b0 answers")

			load := loadgen.StartNewConnections(front, "web.localhost", 4)
			stopped := false
			defer func() {
				if !stopped {
					load.Stop()
				}
			}()
			for i := 1; i <= 30; i++ {
				// Some load before each change, so that each change meets requests.
				before := load.OK()
				haproxytest.WaitFor(t, 10*time.Second, func() bool { return load.OK() >= before+20 }, "load flows")
				p := u.Plan(config(i), nil, nil)
				if p.Reload() != "" {
					t.Fatalf("change %d: reload asked: %s", i, p.Reload())
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatalf("change %d: %v", i, err)
				}
				if err := os.WriteFile(path, config(i), 0o600); err != nil {
					t.Fatal(err)
				}
				// The next new connection reaches the new backend.
				want := fmt.Sprintf("b%d", i)
				if got, err := haproxytest.Get(front); got != want {
					t.Fatalf("change %d (%s -> %s): a new connection got %q (%v), want %q", i, addrs[i-1], addrs[i], got, err, want)
				}
			}
			before := load.OK()
			haproxytest.WaitFor(t, 10*time.Second, func() bool { return load.OK() >= before+20 }, "load flows")
			load.Stop()
			stopped = true
			if load.Failed() != 0 {
				t.Fatalf("%d of %d requests failed over 30 changes: %v", load.Failed(), load.OK()+load.Failed(), load.Errors())
			}
			t.Logf("%d requests over 30 changes, none failed", load.OK())
			if pr, err := reload.ParseProc(proc.ShowProc(t)); err != nil || pr.Reloads != 0 {
				t.Fatalf("reloads %d (%v), want 0", pr.Reloads, err)
			}
		})
	}
}
