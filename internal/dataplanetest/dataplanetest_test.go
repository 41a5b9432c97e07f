package dataplanetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

const (
	user = "admin"
	pass = "adminpwd"
	// fast is the runtime reconnection time of tests that do not study it.
	fast = 20 * time.Millisecond
)

type resp struct {
	code   int
	header http.Header
	body   string
}

// call makes one request to the stand-in with basic auth (unless noAuth).
func call(t *testing.T, s *Server, method, path, contentType string, body []byte, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.SetBasicAuth(user, pass)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Authorization" && hdr[i+1] == "" {
			req.Header.Del("Authorization")
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{code: res.StatusCode, header: res.Header, body: string(b)}
}

func expect(t *testing.T, r resp, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: status %d (%s), want %d", what, r.code, strings.TrimSpace(r.body), code)
	}
}

func httpConfig(port int, backend string) string {
	return fmt.Sprintf(`global
  hard-stop-after 5s
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  server s1 %s
`, port, backend)
}

func waitReload(t *testing.T, s *Server, id string) Reload {
	t.Helper()
	var r Reload
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		res := call(t, s, "GET", "/services/haproxy/reloads/"+id, "", nil)
		if res.code != http.StatusOK {
			t.Fatalf("GET reloads/%s: %d %s", id, res.code, res.body)
		}
		if err := json.Unmarshal([]byte(res.body), &r); err != nil {
			t.Fatal(err)
		}
		return r.Status != "in_progress"
	}, "reload "+id+" to finish")
	return r
}

func multipartBody(t *testing.T, name string, data []byte) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("file_upload", name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

func TestContract(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			s := Start(t, Options{APIVersion: v, Username: user, Password: pass, RuntimeReconnect: fast})
			pt := t // backends live as long as HAProxy may use them
			if !strings.HasSuffix(s.URL, fmt.Sprintf("/v%d", v)) {
				t.Fatalf("URL %s", s.URL)
			}
			port := haproxytest.FreePort(t)
			addr := fmt.Sprintf("127.0.0.1:%d", port)

			t.Run("401 without or with wrong credentials", func(t *testing.T) {
				expect(t, call(t, s, "GET", "/info", "", nil, "Authorization", ""), 401, "no credentials")
				r := call(t, s, "GET", "/info", "", nil, "Authorization", "Basic "+"YWRtaW46d3Jvbmc=") // admin:wrong
				expect(t, r, 401, "wrong password")
				if r.header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				expect(t, call(t, s, "GET", "/info", "", nil), 200, "right credentials")
			})

			t.Run("version and raw GET", func(t *testing.T) {
				r := call(t, s, "GET", "/services/haproxy/configuration/version", "", nil)
				expect(t, r, 200, "GET version")
				if strings.TrimSpace(r.body) != "1" || r.header.Get("Configuration-Version") != "1" {
					t.Fatalf("version body %q header %q", r.body, r.header.Get("Configuration-Version"))
				}
				r = call(t, s, "GET", "/services/haproxy/configuration/raw", "", nil)
				expect(t, r, 200, "GET raw")
				if v == 2 {
					var got struct {
						Version int64  `json:"_version"`
						Data    string `json:"data"`
					}
					if err := json.Unmarshal([]byte(r.body), &got); err != nil || got.Version != 1 || !strings.Contains(got.Data, "frontend initial") {
						t.Fatalf("v2 raw: %v %+v", err, got)
					}
					expect(t, call(t, s, "GET", "/services/haproxy/configuration/raw", "", nil, "Accept", "text/plain"), 406, "v2 raw as text/plain")
				} else {
					if !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || !strings.Contains(r.body, "frontend initial") || !strings.Contains(r.body, "# _version=1") {
						t.Fatalf("v3 raw: %s %q", r.header.Get("Content-Type"), r.body)
					}
				}
			})

			t.Run("only_validate runs haproxy -c", func(t *testing.T) {
				bad := strings.Replace(httpConfig(port, "127.0.0.1:1"), "default_backend be", "default_backend be\n  bogus-keyword on", 1)
				r := call(t, s, "POST", "/services/haproxy/configuration/raw?only_validate=true", "text/plain", []byte(bad))
				expect(t, r, 400, "only_validate of an invalid config")
				var e apiError
				if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Code != 400 || !strings.Contains(e.Message, "[ALERT]") || !strings.Contains(e.Message, "bogus-keyword") {
					t.Fatalf("400 body: %v %q", err, r.body)
				}
				r = call(t, s, "POST", "/services/haproxy/configuration/raw?only_validate=true", "text/plain", []byte(httpConfig(port, "127.0.0.1:1")))
				expect(t, r, 202, "only_validate of a valid config")
				if r.header.Get("Reload-Id") != "" || s.Version() != 1 {
					t.Fatalf("only_validate changed something: Reload-Id %q, version %d", r.header.Get("Reload-Id"), s.Version())
				}
				expect(t, call(t, s, "POST", "/services/haproxy/configuration/raw?only_validate=true", "text/plain", []byte("no newline")), 400, "no newline")
			})

			t.Run("versioned write, 409, 202 and Reload-Id, real traffic", func(t *testing.T) {
				cfg := []byte(httpConfig(port, haproxytest.Backend(pt, "backend A")))
				expect(t, call(t, s, "POST", "/services/haproxy/configuration/raw", "text/plain", cfg), 400, "no version")
				r := call(t, s, "POST", "/services/haproxy/configuration/raw?version=7", "text/plain", cfg)
				expect(t, r, 409, "wrong version")
				if !strings.Contains(r.body, "version mismatch: the configuration is at version 1, the request has 7") {
					t.Fatalf("409 body %q", r.body)
				}
				r = call(t, s, "POST", "/services/haproxy/configuration/raw?version=1", "text/plain", cfg)
				expect(t, r, 202, "right version")
				id := r.header.Get("Reload-Id")
				if id == "" || s.Version() != 2 || r.header.Get("Configuration-Version") != "2" {
					t.Fatalf("Reload-Id %q, version %d, header %q", id, s.Version(), r.header.Get("Configuration-Version"))
				}
				if got := waitReload(t, s, id); got.Status != "succeeded" {
					t.Fatalf("reload %+v", got)
				}
				if b, err := haproxytest.Get(addr); err != nil || b != "backend A" {
					t.Fatalf("after the reload HAProxy serves %q %v", b, err)
				}
				if stored := s.StoredConfig(t); stored == string(cfg) || !strings.Contains(stored, "# _version=2") {
					t.Fatalf("the API should store its own rewrite, got %q", stored)
				}
				expect(t, call(t, s, "GET", "/services/haproxy/reloads/nope", "", nil), 404, "unknown reload id")
			})

			t.Run("a concurrent writer makes the next write 409", func(t *testing.T) {
				cfg := []byte(httpConfig(port, haproxytest.Backend(pt, "backend B")))
				s.ConcurrentWrites(1)
				cur := s.Version()
				expect(t, call(t, s, "POST", fmt.Sprintf("/services/haproxy/configuration/raw?version=%d", cur), "text/plain", cfg), 409, "racing write")
				r := call(t, s, "POST", fmt.Sprintf("/services/haproxy/configuration/raw?version=%d", s.Version()), "text/plain", cfg)
				expect(t, r, 202, "write at the new version")
				waitReload(t, s, r.header.Get("Reload-Id"))
			})

			t.Run("skip_reload and force_reload", func(t *testing.T) {
				r := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true&skip_reload=true", "text/plain",
					[]byte(httpConfig(port, haproxytest.Backend(pt, "backend C"))))
				expect(t, r, 201, "skip_reload")
				if r.header.Get("Reload-Id") != "" {
					t.Fatal("skip_reload answered a Reload-Id")
				}
				if b, _ := haproxytest.Get(addr); b != "backend B" {
					t.Fatalf("skip_reload reloaded: HAProxy serves %q", b)
				}
				r = call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true&force_reload=true", "text/plain",
					[]byte(httpConfig(port, haproxytest.Backend(pt, "backend D"))))
				expect(t, r, 201, "force_reload")
				if b, err := haproxytest.Get(addr); b != "backend D" {
					t.Fatalf("right after force_reload HAProxy serves %q %v", b, err)
				}
			})

			t.Run("a reload that fails leaves the old workers serving", func(t *testing.T) {
				holder, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer holder.Close()
				cfg := httpConfig(port, haproxytest.Backend(pt, "backend E")) + "frontend clash\n  bind " + holder.Addr().String() + "\n  default_backend be\n"
				r := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(cfg))
				expect(t, r, 202, "write of a config that cannot bind")
				got := waitReload(t, s, r.header.Get("Reload-Id"))
				if got.Status != "failed" || got.Response == "" {
					t.Fatalf("reload %+v, want failed with a response", got)
				}
				if b, _ := haproxytest.Get(addr); b != "backend D" {
					t.Fatalf("after the failed reload HAProxy serves %q", b)
				}
			})

			t.Run("storage", func(t *testing.T) {
				const base = "/services/haproxy/storage/ssl_certificates"
				ct, body := multipartBody(t, "site.pem", testcert.Combined(t, "one.example"))
				r := call(t, s, "POST", base+"?skip_reload=true", ct, body)
				expect(t, r, 201, "upload")
				var c Certificate
				if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.StorageName != "site.pem" || c.File != filepath.Join(s.StorageDir, "site.pem") {
					t.Fatalf("upload answer %v %+v", err, c)
				}
				expect(t, call(t, s, "POST", base, ct, body), 409, "upload of an existing name")
				ct2, body2 := multipartBody(t, "other.pem", testcert.Combined(t, "two.example"))
				r = call(t, s, "POST", base, ct2, body2)
				expect(t, r, 202, "upload with a reload")
				if r.header.Get("Reload-Id") == "" {
					t.Fatal("upload without skip_reload answered no Reload-Id")
				}
				waitReload(t, s, r.header.Get("Reload-Id"))
				var list []Certificate
				r = call(t, s, "GET", base, "", nil)
				if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list) != 2 || list[0].StorageName != "other.pem" {
					t.Fatalf("list %v %s", err, r.body)
				}
				newPEM := testcert.Combined(t, "three.example")
				expect(t, call(t, s, "PUT", base+"/site.pem?skip_reload=true", "text/plain", newPEM), 200, "replace")
				if b, _ := os.ReadFile(filepath.Join(s.StorageDir, "site.pem")); !bytes.Equal(b, newPEM) {
					t.Fatal("replace did not reach the storage directory")
				}
				expect(t, call(t, s, "PUT", base+"/missing.pem?skip_reload=true", "text/plain", newPEM), 404, "replace a missing file")
				expect(t, call(t, s, "PUT", base+"/site.pem?skip_reload=true", "text/plain", []byte("garbage")), 400, "replace with garbage")
				expect(t, call(t, s, "GET", base+"/site.pem", "", nil), 200, "get one")
				expect(t, call(t, s, "DELETE", base+"/site.pem?skip_reload=true", "", nil), 204, "delete")
				expect(t, call(t, s, "DELETE", base+"/site.pem?skip_reload=true", "", nil), 404, "delete again")
				if files := s.StorageFiles(t); !slices.Equal(files, []string{"other.pem"}) {
					t.Fatalf("storage holds %v", files)
				}
			})
		})
	}
}

// Writes inside one reload delay window share a Reload-Id, which is in progress until the
// reload has run.
func TestReloadWindowSharesID(t *testing.T) {
	haproxytest.Binary(t)
	// Each write runs haproxy -c first: the window is wide enough for both on a loaded machine.
	s := Start(t, Options{ReloadDelay: 3 * time.Second, RuntimeReconnect: fast})
	port := haproxytest.FreePort(t)
	r1 := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(httpConfig(port, "127.0.0.1:1")))
	r2 := call(t, s, "POST", "/services/haproxy/configuration/raw?skip_version=true", "text/plain", []byte(httpConfig(port, "127.0.0.1:2")))
	expect(t, r1, 202, "first write")
	expect(t, r2, 202, "second write")
	id := r1.header.Get("Reload-Id")
	if id == "" || r2.header.Get("Reload-Id") != id {
		t.Fatalf("Reload-Ids %q and %q, want one shared id", id, r2.header.Get("Reload-Id"))
	}
	var r Reload
	res := call(t, s, "GET", "/services/haproxy/reloads/"+id, "", nil)
	if err := json.Unmarshal([]byte(res.body), &r); err != nil || r.Status != "in_progress" {
		t.Fatalf("right after the writes: %v %+v", err, r)
	}
	if got := waitReload(t, s, id); got.Status != "succeeded" {
		t.Fatalf("reload %+v", got)
	}
	if n := len(s.Reloads()); n != 1 {
		t.Fatalf("%d reloads, want 1", n)
	}
}

// Down closes the API; Up serves again on the same address.
func TestDownUp(t *testing.T) {
	haproxytest.Binary(t)
	s := Start(t, Options{Token: "tok"})
	expect(t, call(t, s, "GET", "/info", "", nil, "Authorization", "Bearer tok"), 200, "bearer token")
	expect(t, call(t, s, "GET", "/info", "", nil, "Authorization", "Bearer nope"), 401, "wrong bearer token")
	s.Down()
	if _, err := http.Get(s.URL + "/info"); err == nil {
		t.Fatal("the API answers after Down")
	}
	s.Up(t)
	expect(t, call(t, s, "GET", "/info", "", nil, "Authorization", "Bearer tok"), 200, "after Up")
	if n := len(s.Requests()); n != 3 {
		t.Fatalf("%d requests recorded, want 3: %v", n, s.Requests())
	}
}
