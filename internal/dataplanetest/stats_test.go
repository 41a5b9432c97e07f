package dataplanetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// statsConfig answers 503 on one frontend and proxies another to a server that refuses
// connections, with a health check.
func statsConfig(port, port2 int, stats string) string {
	return fmt.Sprintf(`global
  hard-stop-after 5s
%s
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend fe
  bind 127.0.0.1:%d
  http-request return status 503
frontend fe2
  bind 127.0.0.1:%d
  default_backend be
backend be
  server s1 127.0.0.1:1 check inter 100ms
`, stats, port, port2)
}

type stat struct {
	Name        string         `json:"name"`
	Type        string         `json:"type"`
	BackendName string         `json:"backend_name"`
	Stats       map[string]any `json:"stats"`
}

type statsAnswer struct {
	RuntimeAPI string `json:"runtimeAPI"`
	Error      string `json:"error"`
	Stats      []stat `json:"stats"`
}

type infoAnswer struct {
	RuntimeAPI string         `json:"runtimeAPI"`
	Error      string         `json:"error"`
	Info       map[string]any `json:"info"`
}

// decodeOne reads v3's object, or v2's list of one.
func decodeOne(t *testing.T, api int, body string, v any) {
	t.Helper()
	if api == 2 {
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
			t.Fatalf("v2 answers a list of one per runtime socket: %v, %d elements: %s", err, len(list), body)
		}
		body = string(list[0])
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

// TestRuntimeStats: the API's native statistics and process information are HAProxy's own
// `show stat` and `show info`, in the API's models (v3: one object, v2: a list of one).
func TestRuntimeStats(t *testing.T) {
	for _, api := range []int{3, 2} {
		t.Run(fmt.Sprintf("v%d", api), func(t *testing.T) {
			port, port2 := haproxytest.FreePort(t), haproxytest.FreePort(t)
			s := Start(t, Options{APIVersion: api, Username: user, Password: pass, MasterRuntime: true, RuntimeReconnect: fast,
				Config: statsConfig(port, port2, "")})
			for i := 0; i < 7; i++ {
				if _, err := haproxytest.Get(fmt.Sprintf("127.0.0.1:%d", port)); err == nil || !strings.Contains(err.Error(), "503") {
					t.Fatalf("request %d: %v, want a 503", i, err)
				}
			}
			var down stat
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				var a statsAnswer
				decodeOne(t, api, call(t, s, "GET", "/services/haproxy/stats/native?type=server&name=s1&parent=be", "", nil).body, &a)
				if len(a.Stats) == 1 {
					down = a.Stats[0]
				}
				return len(a.Stats) == 1 && a.Stats[0].Stats["status"] == "DOWN"
			}, "the server without a listener is DOWN by its checks")
			if down.BackendName != "be" || down.Type != "server" || !strings.HasSuffix(down.Stats["check_status"].(string), "L4CON") {
				t.Errorf("server row = %+v", down)
			}

			r := call(t, s, "GET", "/services/haproxy/stats/native", "", nil)
			expect(t, r, http.StatusOK, "GET stats/native")
			var a statsAnswer
			decodeOne(t, api, r.body, &a)
			if a.RuntimeAPI != s.HAProxy.MasterSocket+"@1" {
				t.Errorf("runtimeAPI = %q, want the master socket's worker", a.RuntimeAPI)
			}
			var fe *stat
			kinds := map[string]int{}
			for i := range a.Stats {
				kinds[a.Stats[i].Type]++
				if a.Stats[i].Type == "frontend" && a.Stats[i].Name == "fe" {
					fe = &a.Stats[i]
				}
			}
			if fe == nil || fe.Stats["req_tot"] != float64(7) || fe.Stats["hrsp_5xx"] != float64(7) || fe.Stats["status"] != "OPEN" {
				t.Fatalf("frontend fe = %+v, want 7 requests, 7 5xx, OPEN (all: %v)", fe, kinds)
			}
			if _, empty := fe.Stats["econ"]; empty {
				t.Error("a field HAProxy leaves empty is in the answer")
			}
			if kinds["frontend"] != 2 || kinds["backend"] != 1 || kinds["server"] != 1 {
				t.Errorf("rows by type = %v, want 2 frontends, 1 backend, 1 server", kinds)
			}

			expect(t, call(t, s, "GET", "/services/haproxy/stats/native?name=fe", "", nil), http.StatusBadRequest, "a name without a type")

			r = call(t, s, "GET", "/services/haproxy/runtime/info", "", nil)
			expect(t, r, http.StatusOK, "GET runtime/info")
			var info infoAnswer
			decodeOne(t, api, r.body, &info)
			pid, ok := info.Info["pid"].(float64)
			if !ok || pid <= 0 || info.Info["version"] == "" {
				t.Fatalf("info = %+v, want the worker's pid and HAProxy's version", info)
			}
			if _, ok := info.Info["uptime"].(float64); !ok {
				t.Errorf("info has no uptime (Uptime_sec): %+v", info.Info)
			}
		})
	}
}

// TestRuntimeStatsThroughStatsSocket: without master_runtime the API reads the stats socket
// of the stored configuration; with neither, it cannot read statistics.
func TestRuntimeStatsThroughStatsSocket(t *testing.T) {
	sock := haproxytest.ShortTempDir(t) + "/admin.sock"
	s := Start(t, Options{Username: user, Password: pass, RuntimeReconnect: fast,
		Config: statsConfig(haproxytest.FreePort(t), haproxytest.FreePort(t), "  stats socket "+sock+" mode 600 level admin")})
	var a statsAnswer
	r := call(t, s, "GET", "/services/haproxy/stats/native?type=frontend", "", nil)
	expect(t, r, http.StatusOK, "GET stats/native")
	decodeOne(t, 3, r.body, &a)
	if a.RuntimeAPI != sock || len(a.Stats) != 2 {
		t.Errorf("answer = %+v, want the two frontends through %s", a, sock)
	}

	bare := Start(t, Options{Username: user, Password: pass, RuntimeReconnect: fast})
	expect(t, call(t, bare, "GET", "/services/haproxy/stats/native", "", nil), http.StatusInternalServerError, "no runtime API")
}
