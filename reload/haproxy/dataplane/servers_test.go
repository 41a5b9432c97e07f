package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// handConfigured is a host someone else configures (as the API writes it back): comments, a
// stats socket, a frontend to the backend the sidecar manages, and a frontend and a backend it
// does not manage.
func handConfigured(sock string, port, otherPort int, other string) string {
	return fmt.Sprintf(`# lb1: configured by the network team

global
  # the runtime API, for the Data Plane API
  stats socket %s mode 600 level admin
  hard-stop-after 5s

defaults unnamed_defaults_1
  # keep connections short
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s

frontend fe
  bind 127.0.0.1:%d
  default_backend be_web

frontend fe_other
  bind 127.0.0.1:%d
  default_backend be_static

backend be_web
  balance roundrobin
  server old 127.0.0.1:9

backend be_static
  server static1 %s check
`, sock, port, otherPort, other)
}

// rendering is what the templates render: a whole configuration of its own (haproxy -c checks
// it locally), of which the sidecar takes the servers of be_web only.
func rendering(servers ...string) string {
	var b strings.Builder
	b.WriteString(`global
  log stdout format raw local0
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend local
  bind :8080
  default_backend be_web
backend be_web
  default-server check inter 2s
`)
	for _, s := range servers {
		b.WriteString("  " + s + "\n")
	}
	b.WriteString("backend be_render_only\n  server x 127.0.0.1:7\n")
	return b.String()
}

// sections returns the text of each section of a stored configuration by header, the API's
// comments left out.
func sections(config string) map[string]string {
	out := map[string]string{}
	for _, block := range strings.Split(config, "\n\n") {
		first, _, _ := strings.Cut(block, "\n")
		if strings.HasPrefix(first, "# _version") {
			continue
		}
		out[first] = block
	}
	return out
}

type serversHost struct {
	s          *dataplanetest.Server
	front      string // the frontend of the managed backend
	otherFront string
	before     map[string]string
}

func startServersHost(t *testing.T, v int, opts dataplanetest.Options) *serversHost {
	t.Helper()
	sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
	port, otherPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	opts.APIVersion = v
	opts.Config = handConfigured(sock, port, otherPort, haproxytest.Backend(t, "static"))
	if opts.RuntimeReconnect == 0 {
		opts.RuntimeReconnect = 20 * time.Millisecond
	}
	h := &serversHost{s: dataplanetest.Start(t, opts), front: fmt.Sprintf("127.0.0.1:%d", port), otherFront: fmt.Sprintf("127.0.0.1:%d", otherPort)}
	h.before = sections(h.s.StoredConfig(t))
	waitServes(t, h.otherFront, "static")
	return h
}

// untouched checks that every section but be_web is byte for byte as before.
func (h *serversHost) untouched(t *testing.T) {
	t.Helper()
	after := sections(h.s.StoredConfig(t))
	for head, text := range h.before {
		if head == "backend be_web" {
			continue
		}
		if after[head] != text {
			t.Errorf("%q changed:\n%s\nbefore:\n%s", head, after[head], text)
		}
	}
	if len(after) != len(h.before) {
		t.Errorf("sections %v, want %v", len(after), len(h.before))
	}
	waitServes(t, h.otherFront, "static")
}

// managed is the stored be_web section.
func (h *serversHost) managed(t *testing.T) string {
	t.Helper()
	return sections(h.s.StoredConfig(t))["backend be_web"]
}

// servedBy waits until the frontend's answers are exactly bodies (each at least once).
func servedBy(t *testing.T, addr string, bodies ...string) {
	t.Helper()
	var seen map[string]int
	err := haproxytest.Poll(15*time.Second, func() bool {
		seen = map[string]int{}
		for range 4 * len(bodies) {
			b, err := haproxytest.Get(addr)
			if err != nil {
				b = "error: " + err.Error()
			}
			seen[b]++
		}
		if len(seen) != len(bodies) {
			return false
		}
		for _, b := range bodies {
			if seen[b] == 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%s: answers %v, want %v", addr, seen, bodies)
	}
}

func writes(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// TestServersMode: the servers of the managed backend follow the rendering through
// transactions (one reload per change), states alone go through the runtime API (no reload),
// and every other section of the host stays byte for byte.
func TestServersMode(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			pt := t
			host := startServersHost(t, v, dataplanetest.Options{})
			s := host.s
			h := newHarness(t, Config{URLs: []string{s.URL}, Mode: ModeServers, Backends: []string{"be_web"}})
			web := map[string]string{}
			for _, n := range []string{"web-1", "web-2", "web-3"} {
				web[n] = haproxytest.Backend(pt, n)
			}
			server := func(name string, extra ...string) string {
				return strings.Join(append([]string{"server", name, web[name]}, extra...), " ")
			}
			render := func(t *testing.T, servers ...string) {
				t.Helper()
				h.live.set(t, rendering(servers...), nil)
				if err := h.r.Reload(t.Context()); err != nil {
					t.Fatalf("Reload: %v", err)
				}
			}

			t.Run("the rendering's servers replace the host's, in one transaction", func(t *testing.T) {
				render(t, server("web-1"), server("web-2", "weight", "50"))
				servedBy(t, host.front, "web-1", "web-2")
				if got, want := host.managed(t), fmt.Sprintf("backend be_web\n  balance roundrobin\n  default-server check inter 2000\n  server web-1 %s\n  server web-2 %s weight 50", web["web-1"], web["web-2"]); got != want {
					t.Errorf("be_web:\n%s\nwant:\n%s", got, want)
				}
				host.untouched(t)
				if n := len(s.Reloads()); n != 1 {
					t.Errorf("%d reloads, want 1", n)
				}
				if h.res.count(s.URL, ResultSuccess) != 1 {
					t.Errorf("results %v", h.res.all())
				}
			})
			t.Run("the same rendering again sends nothing", func(t *testing.T) {
				n, version := len(s.Requests()), s.Version()
				render(t, server("web-1"), server("web-2", "weight", "50"))
				if w := writes(requestsSince(s, n)); len(w) != 0 || s.Version() != version {
					t.Errorf("writes %v (version %d -> %d), want none", w, version, s.Version())
				}
			})
			t.Run("a server going and one coming: one reload", func(t *testing.T) {
				reloads := len(s.Reloads())
				render(t, server("web-1"), server("web-3"))
				servedBy(t, host.front, "web-1", "web-3")
				if n := len(s.Reloads()) - reloads; n != 1 {
					t.Errorf("%d reloads, want 1", n)
				}
				host.untouched(t)
			})
			t.Run("a state alone goes through the runtime API, with no reload", func(t *testing.T) {
				n, version, reloads := len(s.Requests()), s.Version(), len(s.Reloads())
				render(t, server("web-1"), server("web-3", "disabled"))
				servedBy(t, host.front, "web-1")
				render(t, server("web-1", "disabled"), server("web-3"))
				servedBy(t, host.front, "web-3")
				if s.Version() != version || len(s.Reloads()) != reloads {
					t.Errorf("version %d -> %d, %d reloads: want the configuration untouched", version, s.Version(), len(s.Reloads())-reloads)
				}
				for _, w := range writes(requestsSince(s, n)) {
					if !strings.HasPrefix(w, "PUT /services/haproxy/runtime/") {
						t.Errorf("write %q, want runtime server states only", w)
					}
				}
			})
			t.Run("the next transaction stores the states too, so that a reload keeps them", func(t *testing.T) {
				render(t, server("web-1", "disabled"), server("web-3"), server("web-2"))
				servedBy(t, host.front, "web-2", "web-3")
				if got := host.managed(t); !strings.Contains(got, "server web-1 "+web["web-1"]+" disabled") {
					t.Errorf("be_web does not store web-1's state:\n%s", got)
				}
				host.untouched(t)
			})
		})
	}
}

// TestServersModeRetriesOnTheFreshVersion: the configuration moving under the sidecar, before
// its transaction starts or before it commits, costs a second try on the fresh version; what
// the other client wrote stays.
func TestServersModeRetriesOnTheFreshVersion(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	var mu sync.Mutex
	var otherWrite func()
	host := startServersHost(t, 3, dataplanetest.Options{Hook: func(req string) {
		if req != "POST /services/haproxy/transactions" {
			return
		}
		mu.Lock()
		f := otherWrite
		otherWrite = nil
		mu.Unlock()
		if f != nil {
			f()
		}
	}})
	s := host.s
	h := newHarness(t, Config{URLs: []string{s.URL}, Mode: ModeServers, Backends: []string{"be_web"}})
	one, two := haproxytest.Backend(pt, "one"), haproxytest.Backend(pt, "two")

	t.Run("another client writes before the transaction starts", func(t *testing.T) {
		mu.Lock()
		otherWrite = func() {
			// Another client adds a backend through the raw configuration, at the version.
			cfg := strings.Replace(s.StoredConfig(t), "\nbackend be_static", "\nbackend be_added\n  server a 127.0.0.1:9\n\nbackend be_static", 1)
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/services/haproxy/configuration/raw?version=%d&skip_reload=true", s.URL, s.Version()), strings.NewReader(cfg))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("the other client's write: %v", err)
				return
			}
			if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusCreated {
				t.Errorf("the other client's write: %d %s", res.StatusCode, b)
			}
			if res != nil {
				res.Body.Close()
			}
		}
		mu.Unlock()
		h.live.set(t, rendering("server one "+one), nil)
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		servedBy(t, host.front, "one")
		if !strings.Contains(s.StoredConfig(t), "backend be_added") {
			t.Errorf("the other client's backend is gone:\n%s", s.StoredConfig(t))
		}
		if n := strings.Count(strings.Join(s.Requests(), "\n"), "POST /services/haproxy/transactions"); n != 2 {
			t.Errorf("%d transactions started, want 2 (409, then the fresh version)", n)
		}
	})
	t.Run("another client writes before the commit", func(t *testing.T) {
		n := len(s.Requests())
		s.ConcurrentWrites(1)
		h.live.set(t, rendering("server two "+two), nil)
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		servedBy(t, host.front, "two")
		commits := 0
		for _, r := range requestsSince(s, n) {
			if strings.HasPrefix(r, "PUT /services/haproxy/transactions/") {
				commits++
			}
		}
		if commits != 2 {
			t.Errorf("%d commits, want 2 (409, then the fresh version): %v", commits, requestsSince(s, n))
		}
	})
	t.Run("bounded", func(t *testing.T) {
		s.ConcurrentWrites(100)
		defer s.ConcurrentWrites(0)
		h.live.set(t, rendering("server one "+one), nil)
		err := h.r.Reload(t.Context())
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "409") {
			t.Fatalf("Reload under an endless race = %v, want a 409 error", err)
		}
		mustServe(t, host.front, "two")
	})
}

// TestServersModeRefusals: what a host cannot take is reported and leaves it as it was.
func TestServersModeRefusals(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	host := startServersHost(t, 3, dataplanetest.Options{})
	s := host.s
	h := newHarness(t, Config{URLs: []string{s.URL}, Mode: ModeServers, Backends: []string{"be_web"}})
	one := haproxytest.Backend(pt, "one")
	h.live.set(t, rendering("server one "+one), nil)
	if err := h.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	servedBy(t, host.front, "one")
	stored := s.StoredConfig(t)

	t.Run("a server the host's haproxy -c refuses", func(t *testing.T) {
		// The host has no resolvers section "dns" (the rendering would, for its own check).
		h.live.set(t, rendering("server one "+one, "server two 127.0.0.1:9 resolvers dns"), nil)
		err := h.r.Reload(t.Context())
		var failed *reload.Failed
		if !errors.As(err, &failed) || !strings.Contains(failed.Output, "dns") {
			t.Fatalf("Reload = %v, want *reload.Failed naming the resolvers", err)
		}
		if s.StoredConfig(t) != stored {
			t.Errorf("the host's configuration changed:\n%s", s.StoredConfig(t))
		}
		mustServe(t, host.front, "one")
		if h.res.count(s.URL, ResultFailed) != 1 {
			t.Errorf("results %v, want one failed", h.res.all())
		}
	})
	t.Run("a server the API's model cannot hold", func(t *testing.T) {
		h.live.set(t, rendering("server one "+one+" source 127.0.0.1"), nil)
		err := h.r.Reload(t.Context())
		var failed *reload.Failed
		if !errors.As(err, &failed) || !strings.Contains(failed.Output, `server one: "source" has no field`) {
			t.Fatalf("Reload = %v, want *reload.Failed naming the server and the keyword", err)
		}
	})
	t.Run("a backend the host does not have: an error, the others synced", func(t *testing.T) {
		h2 := newHarness(t, Config{URLs: []string{s.URL}, Mode: ModeServers, Backends: []string{"be_web", "be_render_only"}})
		h2.live.set(t, rendering("server one "+one, "server two "+haproxytest.Backend(pt, "two")), nil)
		err := h2.r.Reload(t.Context())
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "has no backend be_render_only") {
			t.Fatalf("Reload = %v, want an error naming the missing backend", err)
		}
		servedBy(t, host.front, "one", "two")
	})
}

// TestServersModePutsBackAfterAFailedReload: when HAProxy refuses to load what was committed
// (here a certificate gone between the API's check and the reload), the previous servers are
// stored again, so that the API holds what HAProxy runs.
func TestServersModePutsBackAfterAFailedReload(t *testing.T) {
	haproxytest.Binary(t)
	crt := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(crt, testcert.Combined(t, "client"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	armed := false
	host := startServersHost(t, 3, dataplanetest.Options{BeforeReload: func() {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			armed = false
			os.Remove(crt) // after the commit's check, before its reload
		}
	}})
	s := host.s
	h := newHarness(t, Config{URLs: []string{s.URL}, Mode: ModeServers, Backends: []string{"be_web"}})
	one := haproxytest.Backend(t, "one")
	h.live.set(t, rendering("server one "+one), nil)
	if err := h.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	servedBy(t, host.front, "one")
	stored := host.managed(t)

	mu.Lock()
	armed = true
	mu.Unlock()
	h.live.set(t, rendering("server one "+one, "server tls 127.0.0.1:9 ssl verify none crt "+crt), nil)
	err := h.r.Reload(t.Context())
	var failed *reload.Failed
	if !errors.As(err, &failed) || !strings.Contains(failed.Output, "failed to reload") {
		t.Fatalf("Reload = %v, want *reload.Failed for the failed reload", err)
	}
	haproxytest.WaitFor(t, 15*time.Second, func() bool { return host.managed(t) == stored }, "the previous servers stored again")
	mustServe(t, host.front, "one")
	if rl := s.Reloads(); len(rl) < 3 || rl[len(rl)-1].Status != "succeeded" {
		t.Errorf("reloads %+v: want the put-back reloaded successfully", rl)
	}
	if !bytes.Contains([]byte(h.logs.String()), []byte("refused the servers' change")) {
		t.Errorf("logs do not report the refusal:\n%s", h.logs.String())
	}
}
