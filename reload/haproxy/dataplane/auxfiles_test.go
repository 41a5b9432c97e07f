package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// auxLive plays the generation store's live map and file directories.
type auxLive struct{ maps, files string }

func newAuxLive(t *testing.T) auxLive {
	t.Helper()
	dir := t.TempDir()
	l := auxLive{maps: filepath.Join(dir, "maps"), files: filepath.Join(dir, "files")}
	for _, d := range []string{l.maps, l.files} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// set replaces the live map files and other files.
func (l auxLive) set(t *testing.T, maps, files map[string]string) {
	t.Helper()
	for dir, want := range map[string]map[string]string{l.maps: maps, l.files: files} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.Remove(filepath.Join(dir, e.Name()))
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// mapConfig routes by Host through mapsDir/hosts.map (when withMap) and answers unknown
// hosts with filesDir/503.http (when withPage).
func mapConfig(port int, mapsDir, filesDir string, withMap, withPage bool, backends ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  hard-stop-after 5s\ndefaults\n  mode http\n  timeout connect 1s\n  timeout client 5s\n  timeout server 5s\n"+
		"frontend fe\n  bind \"${HAPROXY_LOCALPEER}:%d\"\n", port)
	if withMap {
		fmt.Fprintf(&b, "  use_backend %%[req.hdr(host),lower,map(%s/hosts.map)]\n", mapsDir)
	}
	b.WriteString("  default_backend be_none\nbackend be_none\n")
	if withPage {
		fmt.Fprintf(&b, "  errorfile 503 %s/503.http\n", filesDir)
	}
	for i, be := range backends {
		fmt.Fprintf(&b, "backend be_%c\n  server s1 %s\n", 'a'+i, be)
	}
	return b.String()
}

func page(body string) string {
	return "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\n" + body + "\n"
}

// getHost asks addr for / with this Host header: status and body.
func getHost(t *testing.T, addr, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	res, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", addr, host, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

func wantHost(t *testing.T, addr, host string, code int, body string) {
	t.Helper()
	if c, b := getHost(t, addr, host); c != code || b != body {
		t.Fatalf("Host %s: %d %q, want %d %q", host, c, b, code, body)
	}
}

// Map files and other files go through the hosts' map and general storages: uploaded with
// the configuration that uses them, replaced when they change (one reload, the configuration
// unchanged), deleted once no configuration uses them; a configuration the host refuses takes
// its new files back with it.
func TestMapsAndFiles(t *testing.T) {
	haproxytest.Binary(t)
	pt := t
	for _, c := range []struct {
		name string
		opts dataplanetest.Options
	}{
		{"v2", dataplanetest.Options{APIVersion: 2}},
		{"v3", dataplanetest.Options{APIVersion: 3}},
		// A v3.0 before 3.0.6 answers 415 to the form: the file goes again as text/plain.
		{"v3 text general files", dataplanetest.Options{APIVersion: 3, GeneralReplaceText: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startHost(t, peerA, c.opts)
			aux := newAuxLive(t)
			h := newHarness(t, Config{URLs: []string{s.URL}, SSLDir: s.StorageDir,
				MapsDir: aux.maps, FilesDir: aux.files, MapsStorageDir: s.MapsDir, FilesStorageDir: s.GeneralDir})
			if h.r.MapsDir() != s.MapsDir || h.r.FilesDir() != s.GeneralDir {
				t.Fatalf("MapsDir %s FilesDir %s", h.r.MapsDir(), h.r.FilesDir())
			}
			port := peerPort(t)
			addr := peerA + ":" + strconv.Itoa(port)
			a, b := haproxytest.Backend(pt, "backend A"), haproxytest.Backend(pt, "backend B")
			cfg := mapConfig(port, s.MapsDir, s.GeneralDir, true, true, a, b)
			reloadOK := func(t *testing.T) {
				t.Helper()
				if err := h.r.Reload(t.Context()); err != nil {
					t.Fatalf("Reload: %v", err)
				}
			}

			t.Run("added with the configuration that uses them", func(t *testing.T) {
				h.live.set(t, cfg, nil)
				aux.set(t, map[string]string{"hosts.map": "a.example be_a\n"}, map[string]string{"503.http": page("page one")})
				reloadOK(t)
				wantHost(t, addr, "a.example", 200, "backend A")
				wantHost(t, addr, "unknown.example", 503, "page one")
				if m, g := s.MapFiles(t), s.GeneralFiles(t); !slices.Equal(m, []string{"hosts.map"}) || !slices.Equal(g, []string{"503.http"}) {
					t.Fatalf("storages hold %v and %v", m, g)
				}
			})
			t.Run("a map change alone: replaced, one reload", func(t *testing.T) {
				before := len(s.Reloads())
				aux.set(t, map[string]string{"hosts.map": "a.example be_b\n"}, map[string]string{"503.http": page("page one")})
				reloadOK(t)
				wantHost(t, addr, "a.example", 200, "backend B")
				if n := len(s.Reloads()) - before; n != 1 {
					t.Errorf("%d reloads, want 1", n)
				}
			})
			t.Run("a file change alone", func(t *testing.T) {
				aux.set(t, map[string]string{"hosts.map": "a.example be_b\n"}, map[string]string{"503.http": page("page two")})
				reloadOK(t)
				wantHost(t, addr, "unknown.example", 503, "page two")
			})
			t.Run("nothing changed: nothing sent", func(t *testing.T) {
				n := len(s.Requests())
				reloadOK(t)
				if got := requestsSince(s, n); len(got) != 0 {
					t.Errorf("requests for the same content: %v", got)
				}
			})
			t.Run("refused: the new files are taken back", func(t *testing.T) {
				bad := cfg + "backend be_bad\n  http-request set-var(txn.x) str(x),map(" + s.MapsDir + "/missing.map)\n"
				n := len(s.Requests())
				h.live.set(t, bad, nil)
				aux.set(t, map[string]string{"hosts.map": "a.example be_b\n", "extra.map": "x y\n"}, map[string]string{"503.http": page("page two")})
				err := h.r.Reload(t.Context())
				var failed *reload.Failed
				if !errors.As(err, &failed) || !strings.Contains(err.Error(), "missing.map") {
					t.Fatalf("Reload = %v, want the host's refusal naming missing.map", err)
				}
				if m := s.MapFiles(t); !slices.Equal(m, []string{"hosts.map"}) {
					t.Fatalf("map storage holds %v after the refusal", m)
				}
				reqs := strings.Join(requestsSince(s, n), "\n")
				if !strings.Contains(reqs, "POST /services/haproxy/storage/maps") || !strings.Contains(reqs, "DELETE /services/haproxy/storage/maps/extra.map") {
					t.Errorf("the new map was not uploaded before validation and taken back after:\n%s", reqs)
				}
				wantHost(t, addr, "a.example", 200, "backend B")
			})
			t.Run("removed once no configuration uses them", func(t *testing.T) {
				h.live.set(t, mapConfig(port, s.MapsDir, s.GeneralDir, false, false, a, b), nil)
				aux.set(t, nil, nil)
				reloadOK(t)
				if c, b := getHost(t, addr, "a.example"); c != 503 || !strings.Contains(b, "No server is available") {
					t.Fatalf("without the map: %d %q, want HAProxy's own 503", c, b)
				}
				if m, g := s.MapFiles(t), s.GeneralFiles(t); len(m) != 0 || len(g) != 0 {
					t.Fatalf("storages hold %v and %v", m, g)
				}
			})
			if strings.Contains(h.logs.String(), "another directory") {
				t.Errorf("storage directory warning for the right directory:\n%s", h.logs.String())
			}
		})
	}
}

// The hosts' map and general storage directories: given, else listed by the hosts' storages
// at start, else the API's defaults; a host storing elsewhere than the templates say is warned
// about.
func TestAuxStorageDirs(t *testing.T) {
	haproxytest.Binary(t)
	t.Run("defaults, then warned", func(t *testing.T) {
		s := startHost(t, peerA, dataplanetest.Options{})
		aux := newAuxLive(t)
		h := newHarness(t, Config{URLs: []string{s.URL}, SSLDir: s.StorageDir, MapsDir: aux.maps, FilesDir: aux.files})
		m, f, err := h.r.DiscoverAuxDirs(t.Context())
		if err != nil || m != DefaultMapsStorageDir || f != DefaultGeneralStorageDir {
			t.Fatalf("DiscoverAuxDirs on empty storages = %q %q %v, want the API's defaults", m, f, err)
		}
		// The template names the default directory; the host stores elsewhere: its
		// validation names the file it cannot find, and the log says why.
		h.live.set(t, mapConfig(peerPort(t), DefaultMapsStorageDir, DefaultGeneralStorageDir, true, false), nil)
		aux.set(t, map[string]string{"hosts.map": "a be_a\n"}, nil)
		err = h.r.Reload(t.Context())
		var failed *reload.Failed
		if !errors.As(err, &failed) {
			t.Fatalf("Reload = %v, want the host's refusal", err)
		}
		if logs := h.logs.String(); !strings.Contains(logs, "stores map files in another directory") || !strings.Contains(logs, "--dataplane-maps-dir") {
			t.Errorf("no warning about the map storage directory:\n%s", logs)
		}
	})
	t.Run("learned from what the storages list", func(t *testing.T) {
		s := startHost(t, peerA, dataplanetest.Options{})
		for dir, name := range map[string]string{s.MapsDir: "old.map", s.GeneralDir: "old.lua"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h := newHarness(t, Config{URLs: []string{s.URL}})
		if m, f, err := h.r.DiscoverAuxDirs(t.Context()); err != nil || m != s.MapsDir || f != s.GeneralDir {
			t.Fatalf("DiscoverAuxDirs = %q %q %v, want %s %s", m, f, err, s.MapsDir, s.GeneralDir)
		}
	})
	t.Run("given", func(t *testing.T) {
		s := startHost(t, peerA, dataplanetest.Options{})
		h := newHarness(t, Config{URLs: []string{s.URL}, MapsStorageDir: "/srv/maps/", FilesStorageDir: "/srv/files"})
		if m, f, err := h.r.DiscoverAuxDirs(t.Context()); err != nil || m != "/srv/maps" || f != "/srv/files" {
			t.Fatalf("DiscoverAuxDirs = %q %q %v", m, f, err)
		}
	})
}
