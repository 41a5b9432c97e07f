package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

const (
	user = "admin"
	pass = "s3cret-Pa55word"
)

// One push reaches two hosts (a v2 API and a v3 API whose version is detected), traffic
// through each shows the new backend, and an unchanged render sends nothing.
func TestTwoHostsOnePush(t *testing.T) {
	haproxytest.Binary(t)
	pt := t // backends outlive the subtests that start them
	a := startHost(t, peerA, dataplanetest.Options{APIVersion: 2, Username: user, Password: pass})
	b := startHost(t, peerB, dataplanetest.Options{APIVersion: 3, Username: user, Password: pass})
	bURL := strings.TrimSuffix(b.URL, "/v3") // detected through GET /v3/info
	h := newHarness(t, Config{URLs: []string{a.URL, bURL}, Username: user, Password: pass})
	port := peerPort(t)
	addrA, addrB := peerA+":"+strconv.Itoa(port), peerB+":"+strconv.Itoa(port)
	ctx := t.Context()

	t.Run("one push reaches both", func(t *testing.T) {
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend A")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addrA, "backend A")
		mustServe(t, addrB, "backend A")
		if h.res.count(a.URL, ResultSuccess) != 1 || h.res.count(bURL, ResultSuccess) != 1 {
			t.Fatalf("results %v", h.res.all())
		}
	})

	t.Run("an unchanged render sends nothing", func(t *testing.T) {
		na, nb := len(a.Requests()), len(b.Requests())
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if got := append(requestsSince(a, na), requestsSince(b, nb)...); len(got) != 0 {
			t.Fatalf("an unchanged render sent %v", got)
		}
	})

	t.Run("a change reaches both, with the request sequence of the contract", func(t *testing.T) {
		na := len(a.Requests())
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend B")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addrA, "backend B")
		mustServe(t, addrB, "backend B")
		var ops []string
		for _, r := range requestsSince(a, na) {
			op, _, _ := strings.Cut(r, "?")
			if !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		}
		want := []string{
			"GET /services/haproxy/configuration/version",
			"GET /services/haproxy/storage/ssl_certificates",
			"POST /services/haproxy/configuration/raw", // only_validate, then the versioned write
		}
		for _, w := range want {
			if !slices.Contains(ops, w) {
				t.Errorf("no %q among %v", w, ops)
			}
		}
		if !slices.ContainsFunc(ops, func(s string) bool { return strings.HasPrefix(s, "GET /services/haproxy/reloads/") }) {
			t.Errorf("the Reload-Id was not followed: %v", ops)
		}
	})
}

// One host down: the other is updated and Reload succeeds; the failing host is retried in
// the background and catches up once it is back. All hosts down: an error (not *Failed).
func TestHostDownCatchesUp(t *testing.T) {
	haproxytest.Binary(t)
	pt := t // backends outlive the subtests that start them
	a := startHost(t, peerA, dataplanetest.Options{})
	b := startHost(t, peerB, dataplanetest.Options{})
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL}})
	port := peerPort(t)
	addrA, addrB := peerA+":"+strconv.Itoa(port), peerB+":"+strconv.Itoa(port)
	ctx := t.Context()

	h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend A")), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("one down: the other is updated, the failing one catches up", func(t *testing.T) {
		b.Down()
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend B")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload with one host down: %v", err)
		}
		mustServe(t, addrA, "backend B")
		mustServe(t, addrB, "backend A")
		if h.res.count(b.URL, ResultError) == 0 {
			t.Fatalf("no error result for the host that is down: %v", h.res.all())
		}
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return h.res.count(b.URL, ResultError) >= 2 }, "background retries")
		b.Up(t)
		waitServes(t, addrB, "backend B")
		haproxytest.WaitFor(t, 5*time.Second, func() bool { return h.res.count(b.URL, ResultSuccess) == 2 }, "the catch-up reported")
	})

	t.Run("the next Reload replaces the retries", func(t *testing.T) {
		b.Down()
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend C")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend D")), nil)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		b.Up(t)
		waitServes(t, addrB, "backend D")
		mustServe(t, addrA, "backend D")
	})

	t.Run("all down: an error, not a rejection", func(t *testing.T) {
		a.Down()
		b.Down()
		defer a.Up(t)
		defer b.Up(t)
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend E")), nil)
		err := h.r.Reload(ctx)
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) {
			t.Fatalf("Reload with every host down = %v, want a plain error", err)
		}
		mustServe(t, addrA, "backend D")
	})
}

// A configuration the API refuses is *reload.Failed with the API's reason; the last good
// configuration keeps serving. Both refusals: only_validate's 400, and a reload that fails.
func TestRejected(t *testing.T) {
	haproxytest.Binary(t)
	pt := t // backends outlive the subtests that start them
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			s := startHost(t, peerA, dataplanetest.Options{APIVersion: v})
			h := newHarness(t, Config{URLs: []string{s.URL}})
			port := peerPort(t)
			addr := peerA + ":" + strconv.Itoa(port)
			good := httpConfig(port, haproxytest.Backend(pt, "good"))
			h.live.set(t, good, nil)
			if err := h.r.Reload(t.Context()); err != nil {
				t.Fatal(err)
			}
			mustServe(t, addr, "good")

			t.Run("only_validate 400", func(t *testing.T) {
				version := s.Version()
				h.live.set(t, httpConfig(port, "127.0.0.1:1", "  bogus-keyword on\n"), map[string][]byte{"new": testcert.Combined(t, "new.example")})
				err := h.r.Reload(t.Context())
				var failed *reload.Failed
				if !errors.As(err, &failed) || !strings.Contains(failed.Output, "bogus-keyword") {
					t.Fatalf("Reload = %v, want *reload.Failed naming the bad line", err)
				}
				mustServe(t, addr, "good")
				if s.Version() != version {
					t.Fatalf("the refused configuration was stored: version %d -> %d", version, s.Version())
				}
				if files := s.StorageFiles(t); len(files) != 0 {
					t.Fatalf("the certificate uploaded for the refused configuration stayed: %v", files)
				}
				if h.res.count(s.URL, ResultFailed) != 1 {
					t.Fatalf("results %v", h.res.all())
				}
			})

			t.Run("the reload fails", func(t *testing.T) {
				holder, err := net.Listen("tcp", peerA+":0")
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Close()
				h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "clash"), "frontend clash\n  bind "+holder.Addr().String()+"\n  default_backend be\n"), nil)
				err = h.r.Reload(t.Context())
				var failed *reload.Failed
				if !errors.As(err, &failed) || !strings.Contains(failed.Output, "cannot bind") {
					t.Fatalf("Reload = %v, want *reload.Failed with HAProxy's reason", err)
				}
				mustServe(t, addr, "good")
				// What the API stores is the configuration that runs again.
				if stored := s.StoredConfig(t); strings.Contains(stored, "frontend clash") || !strings.Contains(stored, "backend be") {
					t.Fatalf("after the failed reload the API stores:\n%s", stored)
				}
			})

			t.Run("the good configuration again is pushed", func(t *testing.T) {
				h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "good again")), nil)
				if err := h.r.Reload(t.Context()); err != nil {
					t.Fatal(err)
				}
				mustServe(t, addr, "good again")
			})
		})
	}
}

// A concurrent writer bumps the version: the 409 is resolved by re-reading it; an endless
// race is bounded and reported as an error, not a rejection.
func TestConflicts(t *testing.T) {
	haproxytest.Binary(t)
	pt := t // backends outlive the subtests that start them
	s := startHost(t, peerA, dataplanetest.Options{})
	h := newHarness(t, Config{URLs: []string{s.URL}, MaxConflicts: 3})
	port := peerPort(t)
	addr := peerA + ":" + strconv.Itoa(port)

	t.Run("resolved", func(t *testing.T) {
		s.ConcurrentWrites(2)
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "after the race")), nil)
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addr, "after the race")
	})
	t.Run("bounded", func(t *testing.T) {
		s.ConcurrentWrites(100)
		defer s.ConcurrentWrites(0)
		h.live.set(t, httpConfig(port, haproxytest.Backend(pt, "never")), nil)
		err := h.r.Reload(t.Context())
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "409") {
			t.Fatalf("Reload under an endless race = %v, want a 409 error", err)
		}
		mustServe(t, addr, "after the race")
	})
}

// Certificates go through the storage API: added, replaced and removed, and HAProxy serves
// them.
func TestCertificates(t *testing.T) {
	haproxytest.Binary(t)
	pt := t // backends outlive the subtests that start them
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			s := startHost(t, peerA, dataplanetest.Options{APIVersion: v})
			h := newHarness(t, Config{URLs: []string{s.URL}, SSLDir: s.StorageDir})
			port, tlsPort := peerPort(t), peerPort(t)
			tlsAddr := peerA + ":" + strconv.Itoa(tlsPort)
			backend := haproxytest.Backend(pt, "tls")
			withTLS := func(certs ...string) string {
				var crt string
				for _, c := range certs {
					crt += " crt " + s.StorageDir + "/" + c + ".pem"
				}
				return httpConfig(port, backend, fmt.Sprintf("frontend tls\n  mode tcp\n  bind \"${HAPROXY_LOCALPEER}:%d\" ssl%s\n  default_backend be\n", tlsPort, crt))
			}
			reloadOK := func(t *testing.T) {
				t.Helper()
				if err := h.r.Reload(t.Context()); err != nil {
					t.Fatalf("Reload: %v", err)
				}
			}
			served := func(t *testing.T, want string) {
				t.Helper()
				if cn, err := testcert.ServedCN(tlsAddr, ""); err != nil || cn != want {
					t.Fatalf("HAProxy serves certificate %q (%v), want %q", cn, err, want)
				}
			}

			t.Run("add", func(t *testing.T) {
				h.live.set(t, withTLS("site"), map[string][]byte{"site": testcert.Combined(t, "one.example")})
				reloadOK(t)
				served(t, "one.example")
				if files := s.StorageFiles(t); !slices.Equal(files, []string{"site.pem"}) {
					t.Fatalf("storage holds %v", files)
				}
			})
			t.Run("replace", func(t *testing.T) {
				h.live.set(t, withTLS("site"), map[string][]byte{"site": testcert.Combined(t, "two.example")})
				reloadOK(t)
				served(t, "two.example")
			})
			t.Run("add a second, then remove the first", func(t *testing.T) {
				second := testcert.Combined(t, "three.example")
				h.live.set(t, withTLS("other", "site"), map[string][]byte{"site": testcert.Combined(t, "two.example"), "other": second})
				reloadOK(t)
				h.live.set(t, withTLS("other"), map[string][]byte{"other": second})
				reloadOK(t)
				served(t, "three.example")
				if files := s.StorageFiles(t); !slices.Equal(files, []string{"other.pem"}) {
					t.Fatalf("storage holds %v after the removal", files)
				}
			})
			t.Run("only the certificate changes", func(t *testing.T) {
				h.live.set(t, withTLS("other"), map[string][]byte{"other": testcert.Combined(t, "four.example")})
				reloadOK(t)
				served(t, "four.example")
			})
			if strings.Contains(h.logs.String(), "another directory") {
				t.Errorf("storage directory warning for the right directory:\n%s", h.logs.String())
			}
		})
	}
}

// Close ends the background retries.
func TestCloseStopsRetries(t *testing.T) {
	haproxytest.Binary(t)
	a := startHost(t, peerA, dataplanetest.Options{})
	b := startHost(t, peerB, dataplanetest.Options{})
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL}})
	b.Down()
	h.live.set(t, httpConfig(peerPort(t), "127.0.0.1:1"), nil)
	if err := h.r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool { return h.res.count(b.URL, ResultError) >= 2 }, "background retries")
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	n := h.res.count(b.URL, ResultError)
	b.Up(t)
	if err := h.r.Reload(context.Background()); err == nil {
		t.Fatal("Reload after Close should fail")
	}
	if h.res.count(b.URL, ResultError) != n || h.res.count(b.URL, ResultSuccess) != 0 {
		t.Fatalf("results after Close: %v", h.res.all())
	}
}

// TestRestartKeepsHosts: a Reloader started again (the sidecar restarted) sends nothing to a
// host whose configuration version has not moved since it was given the same content, and
// pushes again to one whose version moved.
func TestRestartKeepsHosts(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	a := startHost(t, peerA, dataplanetest.Options{APIVersion: 3, Username: user, Password: pass})
	state := filepath.Join(t.TempDir(), "dataplane-hosts.json")
	first := newHarness(t, Config{URLs: []string{a.URL}, Username: user, Password: pass, StateFile: state})
	// restarted is a new Reloader over the same live files (first.live) and state file.
	restarted := func() *harness {
		return newHarness(t, Config{URLs: []string{a.URL}, Username: user, Password: pass, StateFile: state,
			ConfigPath: first.live.config, CertDir: first.live.certs})
	}
	posts := func(since int) []string {
		var out []string
		for _, r := range requestsSince(a, since) {
			if strings.HasPrefix(r, "POST ") || strings.HasPrefix(r, "PUT ") || strings.HasPrefix(r, "DELETE ") {
				out = append(out, r)
			}
		}
		return out
	}
	port := peerPort(t)
	addr := peerA + ":" + strconv.Itoa(port)
	ctx := t.Context()

	configA := httpConfig(port, haproxytest.Backend(pt, "backend A"))
	first.live.set(t, configA, map[string][]byte{"site": testcert.Combined(t, "a.example")})
	if err := first.r.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	mustServe(t, addr, "backend A")
	saved, err := os.ReadFile(state)
	if err != nil {
		t.Fatalf("no state file after a push: %v", err)
	}
	first.r.Close()

	t.Run("the host still has it: nothing sent", func(t *testing.T) {
		n := len(a.Requests())
		h := restarted()
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if got := posts(n); len(got) != 0 {
			t.Errorf("a restarted Reloader sent %v", got)
		}
		if got := h.res.all(); len(got) != 0 {
			t.Errorf("results %v, want none (nothing applied)", got)
		}
		// It knows what the host has: a change goes out as usual.
		first.live.set(t, httpConfig(port, haproxytest.Backend(pt, "backend B")), map[string][]byte{"site": testcert.Combined(t, "a.example")})
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addr, "backend B")
		h.r.Close()
	})

	t.Run("the host's version moved: pushed again", func(t *testing.T) {
		// The state file as it was after the first push: the host has moved on since.
		if err := os.WriteFile(state, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		first.live.set(t, configA, map[string][]byte{"site": testcert.Combined(t, "a.example")})
		n := len(a.Requests())
		h := restarted()
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if len(posts(n)) == 0 {
			t.Error("nothing sent to a host whose configuration moved")
		}
		mustServe(t, addr, "backend A")
		if h.res.count(a.URL, ResultSuccess) != 1 {
			t.Errorf("results %v", h.res.all())
		}
		h.r.Close()
	})

	// A state file whose hash is not the live files' (written by a sidecar that hashed
	// differently, before an upgrade) with the host's version unchanged: one push, recorded,
	// and nothing at the next start.
	t.Run("another hash of the same files: pushed once", func(t *testing.T) {
		st, err := openState(state)
		if err != nil {
			t.Fatal(err)
		}
		old, ok := st.get(a.URL)
		if !ok || old.Hash == "" {
			t.Fatalf("no state recorded for %s", a.URL)
		}
		if err := st.set(a.URL, hostState{Hash: "0123456789abcdef" + old.Hash[16:], Version: old.Version}); err != nil {
			t.Fatal(err)
		}
		n := len(a.Requests())
		h := restarted()
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if len(posts(n)) == 0 || h.res.count(a.URL, ResultSuccess) != 1 {
			t.Errorf("a host recorded with another hash was not pushed to once: results %v", h.res.all())
		}
		h.r.Close()
		n = len(a.Requests())
		h = restarted()
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if got := posts(n); len(got) != 0 {
			t.Errorf("the start after the push sent %v", got)
		}
		h.r.Close()
		mustServe(t, addr, "backend A")
	})
}
