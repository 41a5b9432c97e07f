package dataplanetest

// Tests of the behaviours measured on the real Data Plane API (see the package documentation),
// one each.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// A fresh host's certificate storage lists `[]` (not null, not an error); the first POST
// answers the stored file's model with its full path, the only way to learn the directory.
func TestEmptyStorageListsEmptyArray(t *testing.T) {
	haproxytest.Binary(t)
	s := Start(t, Options{RuntimeReconnect: fast})
	const base = "/services/haproxy/storage/ssl_certificates"
	r := call(t, s, "GET", base, "", nil)
	expect(t, r, 200, "list an empty storage")
	if strings.TrimSpace(r.body) != "[]" {
		t.Fatalf("empty storage lists %q, want []", r.body)
	}
	ct, body := multipartBody(t, "first.pem", testcert.Combined(t, "first.example"))
	r = call(t, s, "POST", base+"?skip_reload=true", ct, body)
	expect(t, r, 201, "first upload")
	var c Certificate
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.File != filepath.Join(s.StorageDir, "first.pem") {
		t.Fatalf("the upload answers %v %+v, want the file's full path in the storage directory %s", err, c, s.StorageDir)
	}
}

// getStatus asks for a reload's status with a client timeout.
func getStatus(t *testing.T, s *Server, id string, timeout time.Duration) (Reload, error) {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+"/services/haproxy/reloads/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return Reload{}, err
	}
	defer res.Body.Close()
	var r Reload
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r, nil
}

// postConfig writes cfg and returns the Reload-Id.
func postConfig(t *testing.T, s *Server, cfg string) string {
	t.Helper()
	r := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(cfg))
	expect(t, r, 202, "write")
	id := r.header.Get("Reload-Id")
	if id == "" {
		t.Fatal("no Reload-Id")
	}
	return id
}

// ranReload waits until the stand-in has run reload id (its own view, without the API lock).
func ranReload(t *testing.T, s *Server, id string) {
	t.Helper()
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		for _, r := range s.Reloads() {
			if r.ID == id && r.Status != "in_progress" {
				return true
			}
		}
		return false
	}, "reload "+id+" to run")
}

// After a reload, the API holds the lock GET /services/haproxy/reloads/{id} needs until its
// runtime client has reconnected: without a stats socket that is RuntimeReconnect (15 s by
// default); with a stats socket that answers, or with master_runtime, at once.
func TestReloadStatusWaitsForRuntimeReconnect(t *testing.T) {
	haproxytest.Binary(t)
	if DefaultRuntimeReconnect != 15*time.Second {
		t.Errorf("DefaultRuntimeReconnect = %v, want the measured 15s", DefaultRuntimeReconnect)
	}
	const long = time.Hour // never over within a test: the request must block, or not at all

	t.Run("no stats socket: the status waits", func(t *testing.T) {
		s := Start(t, Options{RuntimeReconnect: long})
		id := postConfig(t, s, httpConfig(haproxytest.FreePort(t), "127.0.0.1:1"))
		ranReload(t, s, id)
		_, err := getStatus(t, s, id, 2*time.Second)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("GET reloads/%s during the reconnection = %v, want no answer (a client timeout)", id, err)
		}
		if got := StatsSockets(s.StoredConfig(t)); len(got) != 0 {
			t.Fatalf("StatsSockets found %v in a configuration without one", got)
		}
	})

	t.Run("a stats socket that answers: at once", func(t *testing.T) {
		s := Start(t, Options{RuntimeReconnect: long})
		sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
		cfg := strings.Replace(httpConfig(haproxytest.FreePort(t), "127.0.0.1:1"), "global\n",
			fmt.Sprintf("global\n  stats socket %s mode 600 level admin\n  stats socket ipv4@127.0.0.1:%d level user\n", sock, haproxytest.FreePort(t)), 1)
		id := postConfig(t, s, cfg)
		ranReload(t, s, id)
		r, err := getStatus(t, s, id, 10*time.Second)
		if err != nil || r.Status != "succeeded" {
			t.Fatalf("GET reloads/%s = %+v, %v; want succeeded without waiting", id, r, err)
		}
		if got := StatsSockets(s.StoredConfig(t)); len(got) != 1 || got[0] != sock {
			t.Fatalf("StatsSockets = %v, want only the UNIX socket %s", got, sock)
		}
	})

	t.Run("master_runtime: at once", func(t *testing.T) {
		s := Start(t, Options{RuntimeReconnect: long, MasterRuntime: true})
		id := postConfig(t, s, httpConfig(haproxytest.FreePort(t), "127.0.0.1:1"))
		ranReload(t, s, id)
		if r, err := getStatus(t, s, id, 10*time.Second); err != nil || r.Status != "succeeded" {
			t.Fatalf("GET reloads/%s = %+v, %v; want succeeded without waiting", id, r, err)
		}
	})

	t.Run("before the reload ran: in_progress at once", func(t *testing.T) {
		s := Start(t, Options{RuntimeReconnect: long, ReloadDelay: long})
		id := postConfig(t, s, httpConfig(haproxytest.FreePort(t), "127.0.0.1:1"))
		if r, err := getStatus(t, s, id, 10*time.Second); err != nil || r.Status != "in_progress" {
			t.Fatalf("GET reloads/%s = %+v, %v; want in_progress", id, r, err)
		}
	})
}

// Posting raw configuration stores the API's rewrite of it: its comments, anonymous defaults
// named, sections reordered by kind; HAProxy loads the rewrite and serves as the original
// said, and the rewrite of a rewrite is itself.
func TestRawPostIsRewritten(t *testing.T) {
	haproxytest.Binary(t)
	s := Start(t, Options{RuntimeReconnect: fast})
	port, tcpPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	backend := haproxytest.Backend(t, "rewritten")
	// Backends first, two anonymous defaults sections (tcp, then http): each proxy must keep
	// the defaults written above it.
	sent := fmt.Sprintf(`# written by hand
global
    hard-stop-after 5s

defaults
    mode tcp
    timeout connect 1s
    timeout client 5s
    timeout server 5s
backend be_tcp
    server s1 %[1]s
frontend fe_tcp
    bind 127.0.0.1:%[3]d
    default_backend be_tcp

defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
backend be
    # the only server
    server s1 %[1]s
frontend fe
    bind 127.0.0.1:%[2]d
    default_backend be
`, backend, port, tcpPort)
	want := fmt.Sprintf(`# written by hand

global
  hard-stop-after 5s

defaults unnamed_defaults_1
  mode tcp
  timeout connect 1s
  timeout client 5s
  timeout server 5s

defaults unnamed_defaults_2
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s

frontend fe_tcp from unnamed_defaults_1
  bind 127.0.0.1:%[3]d
  default_backend be_tcp

frontend fe from unnamed_defaults_2
  bind 127.0.0.1:%[2]d
  default_backend be

backend be_tcp from unnamed_defaults_1
  server s1 %[1]s

backend be from unnamed_defaults_2
  # the only server
  server s1 %[1]s
`, backend, port, tcpPort)
	id := postConfig(t, s, sent)
	if got := waitReload(t, s, id); got.Status != "succeeded" {
		t.Fatalf("reload of the rewritten configuration: %+v", got)
	}
	stored := s.StoredConfig(t)
	body, ok := strings.CutPrefix(stored, fmt.Sprintf("# _version=%d\n", s.Version()))
	if !ok {
		t.Fatalf("stored configuration does not start with its version comment:\n%s", stored)
	}
	_, body, _ = strings.Cut(body, "\n") // # _md5hash=
	if body != want {
		t.Fatalf("stored configuration:\n%s\nwant:\n%s", body, want)
	}
	if rewrite(want) != want {
		t.Errorf("rewriting the rewrite changes it:\n%s", rewrite(want))
	}
	// HAProxy runs the rewrite: http on one port, tcp (the backend's raw answer) on the other.
	if b, err := haproxytest.Get(fmt.Sprintf("127.0.0.1:%d", port)); err != nil || b != "rewritten" {
		t.Fatalf("the http frontend serves %q %v", b, err)
	}
	if b, err := haproxytest.Get(fmt.Sprintf("127.0.0.1:%d", tcpPort)); err != nil || b != "rewritten" {
		t.Fatalf("the tcp frontend serves %q %v", b, err)
	}
}
