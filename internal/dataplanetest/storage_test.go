package dataplanetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

func TestSanitizeFilename(t *testing.T) {
	for in, want := range map[string]string{
		"hosts.map":   "hosts.map",
		"a.b.map":     "a_b.map",
		"../x.map":    "_x.map",
		"my file.lua": "my_file.lua",
		".lua":        "_lua",
		"noext":       "noext",
		"503.http":    "503.http",
		"a-b_c.txt":   "a-b_c.txt",
		`a\b.map`:     `a\b.map`,
		"x.tar gz":    "x.tar_gz",
	} {
		if got := sanitizeFilename(in); got != want {
			t.Errorf("sanitizeFilename(%q) = %q, want %q", in, got, want)
		}
	}
}

// mapConfig routes by Host through a map file, and answers 503 with an error page file for
// hosts the map does not know.
func mapConfig(port int, mapFile, errorPage string, backends map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  hard-stop-after 5s
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend fe
  bind 127.0.0.1:%d
  use_backend %%[req.hdr(host),lower,map(%s)]
  default_backend be_none
backend be_none
`, port, mapFile)
	if errorPage != "" {
		fmt.Fprintf(&b, "  errorfile 503 %s\n", errorPage)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range backends {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "backend %s\n  server s1 %s\n", name, backends[name])
	}
	return b.String()
}

// getHost asks HAProxy at addr for / with this Host header.
func getHost(addr, host string) (int, string, error) {
	req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res.StatusCode, strings.TrimSpace(b.String()), nil
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// The map and general storages as the real API has them, with a real HAProxy routing by a
// stored map and answering with a stored error page.
func TestMapAndGeneralStorage(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			s := Start(t, Options{APIVersion: v, Username: user, Password: pass, RuntimeReconnect: fast})
			pt := t
			port := haproxytest.FreePort(t)
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			const maps, general = "/services/haproxy/storage/maps", "/services/haproxy/storage/general"
			hostsMap := filepath.Join(s.MapsDir, "hosts.map")
			page := filepath.Join(s.GeneralDir, "503.http")

			t.Run("map upload, 409, names as the storage makes them", func(t *testing.T) {
				ct, body := multipartBody(t, "hosts.map", []byte("a.example be_a\n"))
				r := call(t, s, "POST", maps, ct, body)
				expect(t, r, 201, "upload")
				if r.header.Get("Reload-Id") != "" {
					t.Error("a map upload asked for a reload")
				}
				f := decode[File](t, r.body)
				if f.StorageName != "hosts.map" || f.File != hostsMap || f.Size == nil || *f.Size != 15 {
					t.Fatalf("upload answer %+v", f)
				}
				expect(t, call(t, s, "POST", maps, ct, body), 409, "upload of an existing name")
				for name, stored := range map[string]string{"paths": "paths.map", "x.v2.map": "x_v2.map", "list.txt": "list.txt.map"} {
					ct, body := multipartBody(t, name, []byte("k v\n"))
					r := call(t, s, "POST", maps, ct, body)
					expect(t, r, 201, "upload "+name)
					if f := decode[File](t, r.body); f.StorageName != stored {
						t.Errorf("%s stored as %q, want %q", name, f.StorageName, stored)
					}
				}
				list := decode[[]File](t, call(t, s, "GET", maps, "", nil).body)
				var names []string
				for _, f := range list {
					names = append(names, f.StorageName)
					if f.File != filepath.Join(s.MapsDir, f.StorageName) || f.Description != "managed map file" {
						t.Errorf("listed %+v", f)
					}
				}
				if !slices.Equal(names, []string{"hosts.map", "list.txt.map", "paths.map", "x_v2.map"}) {
					t.Fatalf("list %v", names)
				}
				r = call(t, s, "GET", maps+"/hosts.map", "", nil)
				expect(t, r, 200, "get one")
				if r.body != "a.example be_a\n" || r.header.Get("Content-Type") != "application/octet-stream" {
					t.Fatalf("get one: %q %s", r.body, r.header.Get("Content-Type"))
				}
				expect(t, call(t, s, "GET", maps+"/nope.map", "", nil), 404, "get a missing map")
			})

			t.Run("general upload", func(t *testing.T) {
				ct, body := multipartBody(t, "503.http", []byte("HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\npage one\n"))
				r := call(t, s, "POST", general, ct, body)
				expect(t, r, 201, "upload")
				if f := decode[File](t, r.body); f.StorageName != "503.http" || f.File != page {
					t.Fatalf("upload answer %+v", f)
				}
				expect(t, call(t, s, "POST", general, ct, body), 409, "upload of an existing name")
			})

			t.Run("a configuration using them serves traffic through them", func(t *testing.T) {
				cfg := mapConfig(port, hostsMap, page, map[string]string{
					"be_a": haproxytest.Backend(pt, "backend A"), "be_b": haproxytest.Backend(pt, "backend B")})
				r := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(cfg))
				expect(t, r, 202, "write")
				if got := waitReload(t, s, r.header.Get("Reload-Id")); got.Status != "succeeded" {
					t.Fatalf("reload %+v", got)
				}
				if code, b, err := getHost(addr, "a.example"); err != nil || code != 200 || b != "backend A" {
					t.Fatalf("a.example: %d %q %v", code, b, err)
				}
				if code, b, err := getHost(addr, "unknown.example"); err != nil || code != 503 || b != "page one" {
					t.Fatalf("unknown host: %d %q %v, want the stored error page", code, b, err)
				}
			})

			t.Run("map replace: text/plain, 404, 415, a reload uses the new map", func(t *testing.T) {
				ct, body := multipartBody(t, "hosts.map", []byte("a.example be_b\n"))
				expect(t, call(t, s, "PUT", maps+"/hosts.map?skip_reload=true", ct, body), 415, "a map replaced as a form")
				expect(t, call(t, s, "PUT", maps+"/nope.map?skip_reload=true", "text/plain", []byte("x y\n")), 404, "replace a missing map")
				expect(t, call(t, s, "PUT", maps+"/hosts.map?skip_reload=true", "text/plain", []byte("a.example be_b\n")), 204, "replace without reload")
				if code, b, _ := getHost(addr, "a.example"); code != 200 || b != "backend A" {
					t.Fatalf("skip_reload reloaded: %d %q", code, b)
				}
				r := call(t, s, "PUT", maps+"/hosts.map", "text/plain", []byte("a.example be_b\nc.example be_a\n"))
				expect(t, r, 202, "replace with a reload")
				if got := waitReload(t, s, r.header.Get("Reload-Id")); got.Status != "succeeded" {
					t.Fatalf("reload %+v", got)
				}
				for host, want := range map[string]string{"a.example": "backend B", "c.example": "backend A"} {
					if code, b, err := getHost(addr, host); err != nil || code != 200 || b != want {
						t.Fatalf("%s after the map's reload: %d %q %v, want %q", host, code, b, err, want)
					}
				}
			})

			t.Run("general replace: the form this version takes", func(t *testing.T) {
				newPage := []byte("HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\npage two\n")
				ct, body := multipartBody(t, "503.http", newPage)
				textCode, formCode := 204, 415
				if v == 3 {
					textCode, formCode = 415, 204
				}
				expect(t, call(t, s, "PUT", general+"/503.http?skip_reload=true", "text/plain", newPage), textCode, "replace as text/plain")
				expect(t, call(t, s, "PUT", general+"/503.http?skip_reload=true", ct, body), formCode, "replace as a form")
				if b, _ := os.ReadFile(page); string(b) != string(newPage) {
					t.Fatalf("the page reads %q", b)
				}
				r := call(t, s, "PUT", general+"/503.http?force_reload=true", "text/plain", newPage)
				if v == 3 {
					r = call(t, s, "PUT", general+"/503.http?force_reload=true", ct, body)
				}
				expect(t, r, 204, "replace with force_reload")
				if code, b, _ := getHost(addr, "unknown.example"); code != 503 || b != "page two" {
					t.Fatalf("right after force_reload: %d %q", code, b)
				}
			})

			t.Run("delete: 409 while the configuration names the file, then 204, then 404", func(t *testing.T) {
				r := call(t, s, "DELETE", maps+"/hosts.map", "", nil)
				expect(t, r, 409, "delete a map the configuration uses")
				if !strings.Contains(r.body, "referenced in haproxy conf") {
					t.Fatalf("409 body %q", r.body)
				}
				expect(t, call(t, s, "DELETE", general+"/503.http", "", nil), 409, "delete an error page the configuration uses")
				expect(t, call(t, s, "DELETE", maps+"/paths.map", "", nil), 204, "delete an unused map")
				expect(t, call(t, s, "DELETE", maps+"/paths.map", "", nil), 404, "delete it again")
				cfg := fmt.Sprintf("global\n  hard-stop-after 5s\ndefaults\n  mode http\n  timeout connect 1s\n  timeout client 5s\n  timeout server 5s\nfrontend fe\n  bind 127.0.0.1:%d\n  # was %s\n  http-request return status 200 content-type text/plain string plain\n", port, hostsMap)
				r = call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(cfg))
				expect(t, r, 202, "write a configuration without them")
				waitReload(t, s, r.header.Get("Reload-Id"))
				expect(t, call(t, s, "DELETE", maps+"/hosts.map", "", nil), 204, "delete the map named only in a comment")
				expect(t, call(t, s, "DELETE", general+"/503.http", "", nil), 204, "delete the page no longer used")
				if m, g := s.MapFiles(t), s.GeneralFiles(t); !slices.Equal(m, []string{"list.txt.map", "x_v2.map"}) || len(g) != 0 {
					t.Fatalf("left: maps %v, general %v", m, g)
				}
			})
		})
	}

	t.Run("a v3.0 before 3.0.6 replaces general files as text/plain", func(t *testing.T) {
		s := Start(t, Options{GeneralReplaceText: true, RuntimeReconnect: fast})
		ct, body := multipartBody(t, "x.lua", []byte("-- one"))
		expect(t, call(t, s, "POST", "/services/haproxy/storage/general", ct, body), 201, "upload")
		expect(t, call(t, s, "PUT", "/services/haproxy/storage/general/x.lua?skip_reload=true", ct, body), 415, "a form")
		expect(t, call(t, s, "PUT", "/services/haproxy/storage/general/x.lua?skip_reload=true", "text/plain", []byte("-- two")), 204, "text/plain")
	})
}
