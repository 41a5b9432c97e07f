package dataplane

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// dirChanges records OnSSLDir calls.
type dirChanges struct {
	mu  sync.Mutex
	got []string // "dir <- previous"
}

func (d *dirChanges) record(dir, previous string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, dir+" <- "+previous)
}

func (d *dirChanges) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// A fresh host (empty storage) needs no --dataplane-ssl-dir: templates see the API's default
// directory until the first certificate upload names the real one; then the configuration
// rendered for the default is stopped before the host validates it (once), the caller is told
// to render again, and the new rendering goes live. A restarted Reloader finds the directory
// in the storage's list.
func TestSSLDirLearnedAtFirstUpload(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	s := startHost(t, peerA, dataplanetest.Options{})
	changes := &dirChanges{}
	h := newHarness(t, Config{URLs: []string{s.URL}, OnSSLDir: changes.record})
	port, tlsPort := peerPort(t), peerPort(t)
	tlsAddr := peerA + ":" + strconv.Itoa(tlsPort)
	backend := haproxytest.Backend(pt, "tls")
	withTLS := func(dir string) string {
		return httpConfig(port, backend, fmt.Sprintf("frontend tls\n  mode tcp\n  bind \"${HAPROXY_LOCALPEER}:%d\" ssl crt %s/site.pem\n  default_backend be\n", tlsPort, dir))
	}
	site := map[string][]byte{"site": testcert.Combined(t, "site.example")}
	ctx := t.Context()

	dir, err := h.r.DiscoverSSLDir(ctx)
	if err != nil || dir != DefaultStorageDir || h.r.SSLDir() != DefaultStorageDir {
		t.Fatalf("DiscoverSSLDir on a fresh host = %q, %v; want %q and no error", dir, err, DefaultStorageDir)
	}

	t.Run("the first upload names the directory; the stale rendering is not pushed", func(t *testing.T) {
		version := s.Version()
		h.live.set(t, withTLS(DefaultStorageDir), site)
		err := h.r.Reload(ctx)
		var failed *reload.Failed
		if !errors.Is(err, ErrSSLDirChanged) || errors.As(err, &failed) {
			t.Fatalf("Reload = %v, want an error wrapping ErrSSLDirChanged (not a rejection)", err)
		}
		if got := changes.all(); !slices.Equal(got, []string{s.StorageDir + " <- " + DefaultStorageDir}) {
			t.Fatalf("OnSSLDir calls %v", got)
		}
		if h.r.SSLDir() != s.StorageDir {
			t.Fatalf("SSLDir = %q, want %q", h.r.SSLDir(), s.StorageDir)
		}
		if s.Version() != version {
			t.Fatal("the configuration rendered for the wrong directory was stored")
		}
		if files := s.StorageFiles(t); !slices.Equal(files, []string{"site.pem"}) {
			t.Fatalf("storage holds %v, want the uploaded site.pem kept for the new rendering", files)
		}
		if got := h.res.all(); len(got) != 0 {
			t.Fatalf("results %v: stopping for a new rendering is not a host failure", got)
		}
	})

	t.Run("the new rendering goes live", func(t *testing.T) {
		h.live.set(t, withTLS(s.StorageDir), site)
		if err := h.r.Reload(ctx); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if cn, err := testcert.ServedCN(tlsAddr, ""); err != nil || cn != "site.example" {
			t.Fatalf("served certificate %q %v", cn, err)
		}
		if len(changes.all()) != 1 {
			t.Fatalf("OnSSLDir calls %v, want one", changes.all())
		}
	})

	t.Run("a restarted Reloader finds the directory listed", func(t *testing.T) {
		again := newHarness(t, Config{URLs: []string{s.URL}})
		if dir, err := again.r.DiscoverSSLDir(ctx); err != nil || dir != s.StorageDir {
			t.Fatalf("DiscoverSSLDir = %q, %v; want %q", dir, err, s.StorageDir)
		}
	})
}

// A configuration that names the old directory is stopped once per host and content: pushed
// again as it is, the host judges it (here: refuses it, its file is not there).
func TestStaleSSLDirStoppedOnce(t *testing.T) {
	haproxytest.Binary(t)
	s := startHost(t, peerA, dataplanetest.Options{})
	h := newHarness(t, Config{URLs: []string{s.URL}})
	port := peerPort(t)
	stale := httpConfig(port, "127.0.0.1:1", fmt.Sprintf("frontend tls\n  mode tcp\n  bind \"${HAPROXY_LOCALPEER}:%d\" ssl crt %s/site.pem\n  default_backend be\n", peerPort(t), DefaultStorageDir))
	h.live.set(t, stale, map[string][]byte{"site": testcert.Combined(t, "site.example")})
	if err := h.r.Reload(t.Context()); !errors.Is(err, ErrSSLDirChanged) {
		t.Fatalf("first Reload = %v, want ErrSSLDirChanged", err)
	}
	err := h.r.Reload(t.Context())
	var failed *reload.Failed
	if !errors.As(err, &failed) || !strings.Contains(failed.Output, DefaultStorageDir+"/site.pem") {
		t.Fatalf("second Reload = %v, want the host's refusal naming the missing file", err)
	}
}

// Given a directory, nothing is asked; hosts that list different directories at start are
// an error (one configuration cannot name both).
func TestDiscoverSSLDir(t *testing.T) {
	haproxytest.Binary(t)
	a := startHost(t, peerA, dataplanetest.Options{})
	b := startHost(t, peerB, dataplanetest.Options{})

	t.Run("given", func(t *testing.T) {
		h := newHarness(t, Config{URLs: []string{a.URL}, SSLDir: "/srv/certs/"})
		n := len(a.Requests())
		if dir, err := h.r.DiscoverSSLDir(t.Context()); err != nil || dir != "/srv/certs" {
			t.Fatalf("DiscoverSSLDir = %q, %v", dir, err)
		}
		if got := requestsSince(a, n); len(got) != 0 {
			t.Fatalf("asked the host %v although the directory was given", got)
		}
	})

	t.Run("a host down at start: the default, no error", func(t *testing.T) {
		b.Down()
		defer b.Up(t)
		h := newHarness(t, Config{URLs: []string{b.URL}})
		if dir, err := h.r.DiscoverSSLDir(t.Context()); err != nil || dir != DefaultStorageDir {
			t.Fatalf("DiscoverSSLDir = %q, %v", dir, err)
		}
	})

	t.Run("hosts that disagree", func(t *testing.T) {
		for _, s := range []*dataplanetest.Server{a, b} {
			h := newHarness(t, Config{URLs: []string{s.URL}})
			h.live.set(t, httpConfig(peerPort(t), "127.0.0.1:1"), map[string][]byte{"x": testcert.Combined(t, "x.example")})
			if err := h.r.Reload(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		h := newHarness(t, Config{URLs: []string{a.URL, b.URL}})
		_, err := h.r.DiscoverSSLDir(t.Context())
		if err == nil || !strings.Contains(err.Error(), "different directories") {
			t.Fatalf("DiscoverSSLDir = %v, want an error about different directories", err)
		}
	})
}

// A configuration without a runtime socket the API can use is warned about once (log and
// OnWarning), again only after one that had a socket; and a reload whose status is slow to
// come (the API reconnecting its runtime client) is said to be waited for.
func TestRuntimeSocketWarningAndSlowReload(t *testing.T) {
	haproxytest.Binary(t)
	s := startHost(t, peerA, dataplanetest.Options{RuntimeReconnect: 1500 * time.Millisecond})
	var mu sync.Mutex
	var warnings []string
	h := newHarness(t, Config{URLs: []string{s.URL}, SlowReload: 200 * time.Millisecond, OnWarning: func(reason, msg string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, reason+": "+msg)
	}})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(warnings)
	}
	port := peerPort(t)
	sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
	withSocket := func(backend string) string {
		return strings.Replace(httpConfig(port, backend), "global\n", "global\n  stats socket "+sock+" mode 600 level admin\n", 1)
	}
	ctx := t.Context()

	h.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if count() != 1 || !strings.HasPrefix(warnings[0], "NoRuntimeSocket: ") || !strings.Contains(warnings[0], "stats socket") {
		t.Fatalf("warnings %v, want one NoRuntimeSocket", warnings)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "waiting for the Data Plane API to report the reload"); n != 1 {
		t.Fatalf("the slow reload status was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "the Data Plane API reported the reload") {
		t.Fatalf("the end of the wait is not logged:\n%s", logs)
	}

	h.live.set(t, httpConfig(port, "127.0.0.1:2"), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if count() != 1 {
		t.Fatalf("warned again for the same omission: %v", warnings)
	}
	h.live.set(t, withSocket("127.0.0.1:3"), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	h.live.set(t, httpConfig(port, "127.0.0.1:4"), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if count() != 2 {
		t.Fatalf("warnings %v, want a second one after the socket was removed again", warnings)
	}
}

func TestHasRuntimeSocket(t *testing.T) {
	for _, tc := range []struct {
		global string
		want   bool
	}{
		{"  stats socket /var/run/haproxy/admin.sock mode 600 level admin\n", true},
		{"  stats socket unix@/run/admin.sock\n", true},
		{"  stats socket \"/run/admin sock\"\n", true},
		{"  stats socket ipv4@127.0.0.1:9999 level admin\n", false},
		{"  stats socket 127.0.0.1:9999\n", false},
		{"  # stats socket /run/admin.sock\n", false},
		{"  stats timeout 30s\n", false},
		{"", false},
	} {
		cfg := "global\n" + tc.global + "defaults\n  mode http\nfrontend fe\n  bind :80\n"
		if got := hasRuntimeSocket([]byte(cfg)); got != tc.want {
			t.Errorf("hasRuntimeSocket(%q) = %v, want %v", tc.global, got, tc.want)
		}
	}
	if hasRuntimeSocket([]byte("global\ndefaults\nfrontend fe\n  stats socket /run/x.sock\n")) {
		t.Error("a stats socket line outside global counted")
	}
}

func TestNamesDir(t *testing.T) {
	const dir = "/etc/haproxy/ssl"
	for _, tc := range []struct {
		config string
		want   bool
	}{
		{"bind :443 ssl crt /etc/haproxy/ssl/site.pem", true},
		{"bind :443 ssl crt /etc/haproxy/ssl", true},
		{"crt '/etc/haproxy/ssl/a.pem'", true},
		{"crt /etc/haproxy/ssl2/a.pem", false},
		{"crt /x/etc/haproxy/ssl/a.pem", false},
		{"ca-file /etc/haproxy/ssl.pem", false},
		{"crt /srv/ssl/a.pem", false},
	} {
		if got := namesDir([]byte(tc.config), dir); got != tc.want {
			t.Errorf("namesDir(%q) = %v, want %v", tc.config, got, tc.want)
		}
	}
}
