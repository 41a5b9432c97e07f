package dataplanetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// serversConfig is a host someone else configures, in the form the API writes it back (so that
// a commit leaves it byte for byte but for what it changes): a stats socket for the runtime
// API, a frontend and a backend with one server.
func serversConfig(sock string, port int, backend string) string {
	return fmt.Sprintf(`# managed by hand

global
  hard-stop-after 5s
  stats socket %s mode 600 level admin

defaults unnamed_defaults_1
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s

frontend fe
  bind 127.0.0.1:%d
  default_backend be

backend be
  balance roundrobin
  server s1 %s
`, sock, port, backend)
}

// paths are the server endpoints of an API version.
type paths struct{ v int }

func (p paths) servers(backend string) string {
	if p.v == 2 {
		return "/services/haproxy/configuration/servers?backend=" + backend
	}
	return "/services/haproxy/configuration/backends/" + backend + "/servers"
}

func (p paths) server(backend, name string) string {
	if p.v == 2 {
		return "/services/haproxy/configuration/servers/" + name + "?backend=" + backend
	}
	return "/services/haproxy/configuration/backends/" + backend + "/servers/" + name
}

func (p paths) runtime(backend, name string) string {
	if p.v == 2 {
		return "/services/haproxy/runtime/servers/" + name + "?backend=" + backend
	}
	return "/services/haproxy/runtime/backends/" + backend + "/servers/" + name
}

// with adds a query parameter to a path.
func with(path, kv string) string {
	if strings.Contains(path, "?") {
		return path + "&" + kv
	}
	return path + "?" + kv
}

// data unwraps a v2 read ({"_version", "data"}).
func data(t *testing.T, v int, body string) json.RawMessage {
	t.Helper()
	if v == 3 {
		return json.RawMessage(body)
	}
	var w struct {
		Version *int64          `json:"_version"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &w); err != nil || w.Version == nil {
		t.Fatalf("v2 read %s: want {\"_version\", \"data\"} (%v)", body, err)
	}
	return w.Data
}

func startTxn(t *testing.T, s *Server, version int64) string {
	t.Helper()
	r := call(t, s, "POST", fmt.Sprintf("/services/haproxy/transactions?version=%d", version), "", nil)
	expect(t, r, http.StatusCreated, "start a transaction")
	var tx struct {
		ID      string `json:"id"`
		Version int64  `json:"_version"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.body), &tx); err != nil || tx.ID == "" || tx.Version != version || tx.Status != "in_progress" {
		t.Fatalf("transaction %s: %v", r.body, err)
	}
	return tx.ID
}

func sectionText(config, header string) string {
	i := strings.Index(config, "\n"+header+"\n")
	if i < 0 {
		return ""
	}
	rest := config[i+1:]
	if j := strings.Index(rest, "\n\n"); j >= 0 {
		rest = rest[:j+1]
	}
	return rest
}

// TestServersInATransaction: servers and a backend's default-server change in one transaction,
// committed with one reload; traffic follows; the other sections stay byte for byte.
func TestServersInATransaction(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			p := paths{v}
			one, two := haproxytest.Backend(t, "one"), haproxytest.Backend(t, "two")
			port := haproxytest.FreePort(t)
			sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
			s := Start(t, Options{APIVersion: v, Username: user, Password: pass, RuntimeReconnect: fast, Config: serversConfig(sock, port, one)})
			front := fmt.Sprintf("127.0.0.1:%d", port)
			haproxytest.WaitFor(t, 10*time.Second, func() bool { b, _ := haproxytest.Get(front); return b == "one" }, "served by s1")
			before := s.StoredConfig(t)

			r := call(t, s, "GET", p.servers("be"), "", nil)
			expect(t, r, http.StatusOK, "list servers")
			var list []map[string]any
			if err := json.Unmarshal(data(t, v, r.body), &list); err != nil || len(list) != 1 || list[0]["name"] != "s1" || list[0]["address"] != "127.0.0.1" {
				t.Fatalf("servers: %s (%v)", r.body, err)
			}
			if r := call(t, s, "GET", p.servers("nosuch"), "", nil); r.code != http.StatusOK || !strings.Contains(r.body, "[]") {
				t.Errorf("servers of a backend that does not exist: %d %s, want an empty list", r.code, r.body)
			}

			version := s.Version()
			id := startTxn(t, s, version)
			host, portTwo, _ := strings.Cut(two, ":")
			expect(t, call(t, s, "POST", with(p.servers("be"), "transaction_id="+id), "application/json",
				[]byte(fmt.Sprintf(`{"name": "s2", "address": %q, "port": %s, "check": "enabled", "inter": 2000}`, host, portTwo))), http.StatusAccepted, "add s2")
			expect(t, call(t, s, "DELETE", with(p.server("be", "s1"), "transaction_id="+id), "", nil), http.StatusAccepted, "delete s1")
			r = call(t, s, "GET", "/services/haproxy/configuration/backends/be?transaction_id="+id, "", nil)
			expect(t, r, http.StatusOK, "get the backend")
			var be map[string]any
			if err := json.Unmarshal(data(t, v, r.body), &be); err != nil || be["name"] != "be" {
				t.Fatalf("backend: %s (%v)", r.body, err)
			}
			be["default_server"] = map[string]any{"check": "enabled", "fall": 3}
			body, _ := json.Marshal(be)
			expect(t, call(t, s, "PUT", "/services/haproxy/configuration/backends/be?transaction_id="+id, "application/json", body), http.StatusAccepted, "set default-server")
			if s.Version() != version || s.StoredConfig(t) != before {
				t.Fatalf("changes inside a transaction were stored before the commit")
			}
			r = call(t, s, "PUT", "/services/haproxy/transactions/"+id, "", nil)
			expect(t, r, http.StatusAccepted, "commit")
			if rl := waitReload(t, s, r.header.Get("Reload-Id")); rl.Status != "succeeded" {
				t.Fatalf("reload: %+v", rl)
			}
			haproxytest.WaitFor(t, 10*time.Second, func() bool { b, _ := haproxytest.Get(front); return b == "two" }, "served by s2")
			if s.Version() != version+1 {
				t.Errorf("version %d after a commit, want %d", s.Version(), version+1)
			}
			after := s.StoredConfig(t)
			for _, h := range []string{"global", "defaults unnamed_defaults_1", "frontend fe"} {
				if sectionText(after, h) == "" || sectionText(after, h) != sectionText(before, h) {
					t.Errorf("%s changed:\n%s\nbefore:\n%s", h, sectionText(after, h), sectionText(before, h))
				}
			}
			if !strings.Contains(after, "# managed by hand\n") {
				t.Errorf("the comment on top is gone:\n%s", after)
			}
			wantBackend := fmt.Sprintf("backend be\n  balance roundrobin\n  default-server check fall 3\n  server s2 %s check inter 2000\n", two)
			if got := sectionText(after, "backend be"); got != wantBackend {
				t.Errorf("backend be:\n%s\nwant:\n%s", got, wantBackend)
			}
			r = call(t, s, "GET", p.server("be", "s2"), "", nil)
			expect(t, r, http.StatusOK, "get s2")
			var s2 map[string]any
			if err := json.Unmarshal(data(t, v, r.body), &s2); err != nil || s2["check"] != "enabled" || s2["inter"] != float64(2000) || s2["port"] == nil {
				t.Errorf("s2 reads back as %s (%v)", r.body, err)
			}
		})
	}
}

// TestTransactionVersionRules: a transaction starts at the configuration's version; a commit
// after another write is refused (409) and the transaction is outdated (406 from then on), as
// is one started at the version another commit moved on; writes take a transaction or a
// version, not both; haproxy -c refuses a broken result (400, failed).
func TestTransactionVersionRules(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			p := paths{v}
			port := haproxytest.FreePort(t)
			sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
			s := Start(t, Options{APIVersion: v, Username: user, Password: pass, RuntimeReconnect: fast, Config: serversConfig(sock, port, "127.0.0.1:9")})
			version := s.Version()
			addS := func(id, name string) resp {
				return call(t, s, "POST", with(p.servers("be"), "transaction_id="+id), "application/json", []byte(`{"name": "`+name+`", "address": "127.0.0.1", "port": 10}`))
			}

			if r := call(t, s, "POST", fmt.Sprintf("/services/haproxy/transactions?version=%d", version-1), "", nil); r.code != http.StatusConflict || !strings.Contains(r.body, "given version is") {
				t.Errorf("start at a stale version: %d %s, want 409", r.code, r.body)
			}

			a, b := startTxn(t, s, version), startTxn(t, s, version)
			expect(t, addS(a, "sa"), http.StatusAccepted, "add in a")
			expect(t, addS(b, "sb"), http.StatusAccepted, "add in b")
			expect(t, call(t, s, "PUT", "/services/haproxy/transactions/"+a+"?force_reload=true", "", nil), http.StatusOK, "commit a (force_reload)")
			if r := call(t, s, "PUT", "/services/haproxy/transactions/"+b, "", nil); r.code != http.StatusNotAcceptable || !strings.Contains(r.body, "outdated") {
				t.Errorf("commit of a transaction another commit outdated: %d %s, want 406", r.code, r.body)
			}

			c := startTxn(t, s, s.Version())
			expect(t, addS(c, "sc"), http.StatusAccepted, "add in c")
			s.ConcurrentWrites(1) // another client writes before the commit
			if r := call(t, s, "PUT", "/services/haproxy/transactions/"+c, "", nil); r.code != http.StatusConflict || !strings.Contains(r.body, "version mismatch") {
				t.Errorf("commit after another write: %d %s, want 409", r.code, r.body)
			}
			r := call(t, s, "GET", "/services/haproxy/transactions/"+c, "", nil)
			if r.code != http.StatusOK || !strings.Contains(r.body, `"outdated"`) {
				t.Errorf("the transaction after a 409: %d %s, want outdated", r.code, r.body)
			}
			if r := call(t, s, "PUT", "/services/haproxy/transactions/"+c, "", nil); r.code != http.StatusNotAcceptable {
				t.Errorf("commit of an outdated transaction: %d, want 406", r.code)
			}
			if r := addS(c, "sd"); r.code != http.StatusBadRequest {
				t.Errorf("a change in an outdated transaction: %d, want 400", r.code)
			}
			stored := s.StoredConfig(t)
			if !strings.Contains(stored, "server sa ") || strings.Contains(stored, "server sb ") || strings.Contains(stored, "server sc ") {
				t.Errorf("stored configuration:\n%s\nwant sa only", stored)
			}

			d := startTxn(t, s, s.Version())
			expect(t, call(t, s, "POST", with(p.servers("be"), "transaction_id="+d), "application/json", []byte(`{"name": "sa", "address": "127.0.0.1"}`)), http.StatusConflict, "add a server that exists")
			expect(t, call(t, s, "DELETE", with(p.server("be", "nosuch"), "transaction_id="+d), "", nil), http.StatusNotFound, "delete a server that does not exist")
			expect(t, call(t, s, "POST", with(p.servers("be"), "transaction_id="+d), "application/json", []byte(`{"name": "se", "address": "127.0.0.1", "bogus": 1}`)), http.StatusUnprocessableEntity, "a field the model does not have")
			expect(t, call(t, s, "POST", with(with(p.servers("be"), "transaction_id="+d), "version=1"), "application/json", []byte(`{"name": "se", "address": "127.0.0.1"}`)), http.StatusBadRequest, "both a transaction and a version")
			expect(t, call(t, s, "POST", p.servers("be"), "application/json", []byte(`{"name": "se", "address": "127.0.0.1"}`)), http.StatusBadRequest, "neither a transaction nor a version")
			expect(t, call(t, s, "POST", with(p.servers("be"), "transaction_id="+d), "application/json", []byte(`{"name": "se", "address": "127.0.0.1", "port": 10, "track": "nosuch/x"}`)), http.StatusNotImplemented, "a field the stand-in cannot write")
			// What haproxy -c refuses: a weight above 256.
			expect(t, call(t, s, "POST", with(p.servers("be"), "transaction_id="+d), "application/json", []byte(`{"name": "se", "address": "127.0.0.1", "port": 10, "weight": 1000}`)), http.StatusAccepted, "add se")
			before := s.Version()
			r = call(t, s, "PUT", "/services/haproxy/transactions/"+d, "", nil)
			if r.code != http.StatusBadRequest || !strings.Contains(r.body, "transactionId="+d) {
				t.Errorf("commit of a configuration haproxy -c refuses: %d %s, want 400", r.code, r.body)
			}
			if s.Version() != before || !strings.Contains(call(t, s, "GET", "/services/haproxy/transactions/"+d, "", nil).body, `"failed"`) {
				t.Errorf("a refused commit moved the version or left the transaction as it was")
			}
			expect(t, call(t, s, "DELETE", "/services/haproxy/transactions/"+d, "", nil), http.StatusNoContent, "delete the transaction")
			expect(t, call(t, s, "GET", "/services/haproxy/transactions/"+d, "", nil), http.StatusNotFound, "a deleted transaction")

			// A change of its own, with version: stored at once, with a reload.
			if r := call(t, s, "DELETE", with(p.server("be", "sa"), fmt.Sprintf("version=%d", s.Version()-1)), "", nil); r.code != http.StatusConflict {
				t.Errorf("a change at a stale version: %d, want 409", r.code)
			}
			// Another client writes just before: refused as well, in the same words.
			s.ConcurrentWrites(1)
			at := s.Version()
			if r := call(t, s, "DELETE", with(p.server("be", "sa"), fmt.Sprintf("version=%d", at)), "", nil); r.code != http.StatusConflict || !strings.Contains(r.body, fmt.Sprintf("version in configuration file is %d, given version is %d", at+1, at)) {
				t.Errorf("a change that another write overtook: %d %s, want 409", r.code, r.body)
			}
			r = call(t, s, "DELETE", with(p.server("be", "sa"), fmt.Sprintf("version=%d", s.Version())), "", nil)
			expect(t, r, http.StatusAccepted, "delete sa at the version")
			if rl := waitReload(t, s, r.header.Get("Reload-Id")); rl.Status != "succeeded" || strings.Contains(s.StoredConfig(t), "server sa ") {
				t.Errorf("reload %+v; stored:\n%s", rl, s.StoredConfig(t))
			}
		})
	}
}

// TestRuntimeServers: the runtime endpoints read and set a server's administrative state
// through HAProxy's stats socket, with no reload and no change to the stored configuration.
func TestRuntimeServers(t *testing.T) {
	haproxytest.Binary(t)
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			p := paths{v}
			port := haproxytest.FreePort(t)
			sock := filepath.Join(haproxytest.ShortTempDir(t), "admin.sock")
			s := Start(t, Options{APIVersion: v, Username: user, Password: pass, RuntimeReconnect: fast, Config: serversConfig(sock, port, haproxytest.Backend(t, "one"))})
			front := fmt.Sprintf("127.0.0.1:%d", port)
			haproxytest.WaitFor(t, 10*time.Second, func() bool { b, _ := haproxytest.Get(front); return b == "one" }, "served by s1")
			stored, version := s.StoredConfig(t), s.Version()

			state := func() string {
				r := call(t, s, "GET", p.runtime("be", "s1"), "", nil)
				expect(t, r, http.StatusOK, "runtime server")
				var rs struct {
					Name       string `json:"name"`
					AdminState string `json:"admin_state"`
				}
				if err := json.Unmarshal([]byte(r.body), &rs); err != nil || rs.Name != "s1" {
					t.Fatalf("runtime server: %s (%v)", r.body, err)
				}
				return rs.AdminState
			}
			if got := state(); got != "ready" {
				t.Fatalf("admin state %q, want ready", got)
			}
			expect(t, call(t, s, "PUT", p.runtime("be", "s1"), "application/json", []byte(`{"admin_state": "maint"}`)), http.StatusOK, "set maint")
			if got := state(); got != "maint" {
				t.Errorf("admin state %q after setting maint", got)
			}
			haproxytest.WaitFor(t, 10*time.Second, func() bool { _, err := haproxytest.Get(front); return err != nil }, "no server to serve")
			expect(t, call(t, s, "PUT", p.runtime("be", "s1"), "application/json", []byte(`{"admin_state": "ready"}`)), http.StatusOK, "set ready")
			haproxytest.WaitFor(t, 10*time.Second, func() bool { b, _ := haproxytest.Get(front); return b == "one" }, "served by s1 again")
			expect(t, call(t, s, "PUT", p.runtime("be", "s1"), "application/json", []byte(`{"admin_state": "sleepy"}`)), http.StatusUnprocessableEntity, "an unknown state")
			expect(t, call(t, s, "PUT", p.runtime("be", "nosuch"), "application/json", []byte(`{"admin_state": "maint"}`)), http.StatusNotFound, "a server that does not exist")
			if s.StoredConfig(t) != stored || s.Version() != version || len(s.Reloads()) != 0 {
				t.Errorf("runtime changes stored something or reloaded (%d reloads)", len(s.Reloads()))
			}
		})
	}
}
