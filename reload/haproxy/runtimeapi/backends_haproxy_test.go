package runtimeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// beRig is a real HAProxy that routes by host through hosts.map to backends made from the
// named defaults section web.
type beRig struct {
	*mapRig
	servers map[string]string // server name -> address
}

func (r *beRig) config(backends ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    stats socket %s mode 600 level admin\n    hard-stop-after 5s\n\n", r.stats)
	// hashed balances by source address: add server refuses servers there.
	b.WriteString("defaults hashed\n    mode http\n    balance source\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n")
	b.WriteString("defaults web\n    mode http\n    balance roundrobin\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n")
	fmt.Fprintf(&b, "frontend fe\n    bind %s\n    use_backend %%[req.hdr(host),lower,map(%s/hosts.map,be_default)]\n    default_backend be_default\n\n", r.http, r.maps)
	b.WriteString("backend be_default\n    http-request return status 404 content-type text/plain string none\n")
	for _, be := range backends {
		fmt.Fprintf(&b, "\nbackend be_%s\n    server %s %s\n", be, be, r.servers[be])
	}
	return []byte(b.String())
}

// TestBackendsOnRealHAProxy adds and removes whole backends on a real HAProxy 3.4 or later,
// through the master socket and a stats socket, with no reload: a new backend serves as soon
// as the map routes to it; a removed one stops being served and is gone, at once or, when a
// request is still in flight on its server, once it has ended. Before 3.4 the same change
// asks for a reload, naming the version show info gave.
func TestBackendsOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	for _, via := range []string{"master socket", "stats socket"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			r := &beRig{mapRig: newMapRig(t), servers: map[string]string{}}
			arrived, release := make(chan struct{}, 1), make(chan struct{})
			slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if req.URL.Path == "/slow" {
					arrived <- struct{}{}
					<-release
				}
				io.WriteString(w, "c")
			}))
			t.Cleanup(slow.Close)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			r.servers["a"], r.servers["b"], r.servers["c"] = haproxytest.Backend(t, "a"), haproxytest.Backend(t, "b"), slow.Listener.Addr().String()
			cfg, maps := r.config("a"), mapFiles("hosts.map", "a.test be_a\n")
			r.write(t, cfg, maps)
			r.proc = haproxytest.Start(t, r.cfgPath)
			u := r.updater(t, via)
			u.Reloaded(u.Plan(cfg, nil, maps))
			u.Learn(ctx)
			r.answers(t, "a.test", "/", "a")

			apply := func(t *testing.T, nextCfg []byte, nextMaps map[string][]byte) {
				t.Helper()
				p := u.Plan(nextCfg, nil, nextMaps)
				if p.Reload() != "" {
					t.Fatalf("reload asked: %s", p.Reload())
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatal(err)
				}
				cfg, maps = nextCfg, nextMaps
				r.write(t, cfg, maps)
			}
			backends := func() string {
				out, err := u.opts.Client.Command(ctx, u.opts.Prefix+"show backend")
				if err != nil {
					t.Fatal(err)
				}
				return strings.Join(strings.Fields(out), " ")
			}
			if v := haproxytest.InstalledVersion(t); !v.AtLeast(3, 4) {
				p := u.Plan(r.config("a", "b"), nil, mapFiles("hosts.map", "a.test be_a\nb.test be_b\n"))
				if want := fmt.Sprintf(`backend "be_b" is new (HAProxy %s cannot add or remove backends at runtime; 3.4 can)`, v.Full); p.Reload() != want {
					t.Fatalf("on HAProxy %s: reload reason %q, want %q", v, p.Reload(), want)
				}
				return
			}

			t.Run("a new backend serves once the map routes to it", func(t *testing.T) {
				apply(t, r.config("a", "b"), mapFiles("hosts.map", "a.test be_a\nb.test be_b\n"))
				r.answers(t, "b.test", "/", "b")
				r.answers(t, "a.test", "/", "a")
				if got := backends(); !strings.Contains(got, "be_b") {
					t.Fatalf("show backend: %s", got)
				}
			})
			t.Run("a removed backend is no longer served, and is gone", func(t *testing.T) {
				apply(t, r.config("b"), mapFiles("hosts.map", "b.test be_b\n"))
				r.answers(t, "a.test", "/", "none")
				// An idle connection HAProxy keeps to the server may not be closed yet when
				// the server is deleted (about 1 in 15 runs): Tidy deletes both later.
				haproxytest.WaitFor(t, 10*time.Second, func() bool { return u.Tidy(ctx) == 0 }, "Tidy has nothing left")
				if got := backends(); strings.Contains(got, "be_a") {
					t.Fatalf("show backend after the removal: %s", got)
				}
			})
			t.Run("a backend whose server has a request in flight goes once the request ended", func(t *testing.T) {
				apply(t, r.config("b", "c"), mapFiles("hosts.map", "b.test be_b\nc.test be_c\n"))
				r.answers(t, "c.test", "/", "c")
				inFlight := make(chan string, 1)
				go func() {
					got, err := r.get("c.test", "/slow")
					if err != nil {
						got = err.Error()
					}
					inFlight <- got
				}()
				select {
				case <-arrived:
				case got := <-inFlight:
					t.Fatalf("the slow request answered %q before it reached server be_c/c", got)
				}
				apply(t, r.config("b"), mapFiles("hosts.map", "b.test be_b\n"))
				r.answers(t, "c.test", "/", "none")
				if got := backends(); !strings.Contains(got, "be_c") {
					t.Fatalf("be_c deleted while its server has a request in flight: %s", got)
				}
				if left := u.Tidy(ctx); left == 0 {
					t.Fatal("Tidy: nothing left while the request is in flight")
				}
				close(release)
				if got := <-inFlight; got != "c" {
					t.Fatalf("the request in flight answered %q, want c: a removal cuts no request", got)
				}
				haproxytest.WaitFor(t, 10*time.Second, func() bool { return u.Tidy(ctx) == 0 }, "Tidy deletes the server and its backend")
				if got := backends(); strings.Contains(got, "be_c") {
					t.Fatalf("show backend after Tidy: %s", got)
				}
				apply(t, r.config("b", "c"), mapFiles("hosts.map", "b.test be_b\nc.test be_c\n"))
				r.answers(t, "c.test", "/", "c")
			})
			t.Run("a backend HAProxy refuses: the update fails with HAProxy's answer (the sidecar then reloads)", func(t *testing.T) {
				next := append(r.config("b", "c"), fmt.Sprintf("\nbackend be_h from hashed\n    server h %s\n", r.servers["b"])...)
				p := u.Plan(next, nil, maps)
				if p.Reload() != "" {
					t.Fatalf("reload asked: %s", p.Reload())
				}
				err := u.Apply(ctx, p)
				if err == nil || !strings.Contains(err.Error(), "dynamic") {
					t.Fatalf("error %v, want HAProxy's refusal of a server in a backend balanced by source", err)
				}
				u.Reloaded(u.Plan(cfg, nil, maps)) // what the sidecar's reload of the files makes known again
			})
			t.Run("no reload happened, and a reload of the files loads the same", func(t *testing.T) {
				proc, err := reload.ParseProc(r.proc.ShowProc(t))
				if err != nil || proc.Reloads != 0 {
					t.Fatalf("reloads %d (%v), want 0", proc.Reloads, err)
				}
				if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
					t.Fatal(err)
				}
				r.answers(t, "b.test", "/", "b")
				r.answers(t, "c.test", "/", "c")
				r.answers(t, "a.test", "/", "none")
			})
		})
	}
}
