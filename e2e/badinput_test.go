package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// TestBadInputKeepsLastGoodConfig feeds each kind of bad input to a running sidecar in front of
// a real HAProxy. For each: a clear error naming the object and the reason, a metric, nothing
// new where HAProxy reads, traffic still served by the last good configuration, and recovery
// as soon as the input is fixed.
func TestBadInputKeepsLastGoodConfig(t *testing.T) {
	e := servingDemo(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	// A port held by someone else: binding it passes haproxy -c but fails at reload.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	_, otherKeyPEM := testcert.Pair(t, "other.localhost")
	otherKey := string(otherKeyPEM)
	indent := func(s string) string { return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") + "\n" }

	cases := []struct {
		name  string
		file  string
		edit  func(string) string
		stage string
		want  []string // the error names the object and the reason
		// at, when set: the reason starts with FILE:LINE of the edited file, a line that holds
		// this.
		at string
		// other is the service whose pod changes while the bad input is held: it must go
		// live ("api" unless the bad input is the api service).
		other string
	}{
		{
			name: "invalid JSON in a services key", file: "services.yaml", stage: "decode",
			edit: func(s string) string {
				return strings.Replace(s, `"selector": {"app": "web"},`, `"selector": {"app": "web"`, 1)
			},
			want: []string{`ConfigMap lb/services key "web"`, "JSON"},
			at:   `"hostnames": ["web.localhost"`,
		},
		{
			name: "a service without a selector", file: "services.yaml", stage: "decode",
			edit:  func(s string) string { return strings.Replace(s, `"selector": {"app": "api"},`, "", 1) },
			want:  []string{`ConfigMap lb/services key "api"`, "selector"},
			other: "web",
		},
		{
			name: "a service without a namespace", file: "services.yaml", stage: "decode",
			edit: func(s string) string { return strings.Replace(s, `"namespace": "demo",`, "", 1) },
			want: []string{`ConfigMap lb/services key "`, "namespace"},
		},
		{
			name: "a hostname that would inject configuration", file: "services.yaml", stage: "render",
			edit: func(s string) string {
				return strings.Replace(s, `"hostnames": ["web.localhost",`,
					`"hostnames": ["web.localhost\n      http-request return status 200 content-type text/plain string INJECTED",`, 1)
			},
			want: []string{`ConfigMap lb/services key "web"`, "hostnames[0]", "new line"},
		},
		{
			name: "a template syntax error", file: "config.yaml", stage: "render",
			edit: func(s string) string {
				return strings.Replace(s, "{%- for service in services %}", "{%- for service in %}", 1)
			},
			want: []string{`ConfigMap lb/config key "template"`, "line"},
			at:   "{%- for service in %}",
		},
		{
			name: "a template runtime error", file: "config.yaml", stage: "render",
			edit: func(s string) string {
				return strings.Replace(s, "  hard-stop-after 30s\n", "  hard-stop-after 30s\n      # {{ stats.password }}\n", 1)
			},
			want: []string{`ConfigMap lb/config key "template"`, "STATISTICS_PASSWORD"},
			at:   "# {{ stats.password }}",
		},
		{
			name: "a rendered config haproxy -c rejects", file: "config.yaml", stage: "validate",
			edit: func(s string) string {
				return strings.Replace(s, "  timeout connect 5s\n", "  timeout connect 5s\n      no-such-keyword on\n", 1)
			},
			want: []string{"ConfigMap lb/config", "haproxy -c", "no-such-keyword"},
		},
		{
			name: "a config that passes haproxy -c but fails to load", file: "config.yaml", stage: "reload",
			edit: func(s string) string {
				return strings.Replace(s, "frontend http\n", fmt.Sprintf("frontend http\n      bind %s\n", held.Addr()), 1)
			},
			want: []string{"ConfigMap lb/config", "refused the new configuration"},
		},
		{
			name: "a PEM that does not parse", file: "certificates.yaml", stage: "decode",
			edit: func(s string) string {
				i := strings.Index(s, "-----BEGIN CERTIFICATE-----\n")
				return s[:i+len("-----BEGIN CERTIFICATE-----\n")] + "    bm90IGEgY2VydGlmaWNhdGU=\n" + s[strings.Index(s, "    -----END CERTIFICATE-----"):]
			},
			want: []string{`ConfigMap lb/certificates key "localhost.pem"`},
		},
		{
			name: "a key that does not match its certificate", file: "certificates.yaml", stage: "decode",
			edit: func(s string) string {
				i := strings.Index(s, "    -----BEGIN PRIVATE KEY-----")
				return s[:i] + indent(otherKey)
			},
			want: []string{`Secret lb/keys key "localhost.pem"`, "match"},
		},
		{
			name: "a certificate without a key", file: "certificates.yaml", stage: "decode",
			edit: func(s string) string {
				return strings.Replace(s, "stringData:\n  localhost.pem: |", "stringData:\n  elsewhere.key: |", 1)
			},
			want: []string{`ConfigMap lb/certificates key "localhost.pem"`, "key"},
		},
		{
			name: "a certificate name with ..", file: "certificates.yaml", stage: "decode",
			edit: func(s string) string {
				// The localhost certificate stays; a copy of it arrives under a bad name.
				start := strings.Index(s, "  localhost.pem: |")
				end := strings.Index(s, "-----END CERTIFICATE-----\n") + len("-----END CERTIFICATE-----\n")
				return s[:end] + strings.Replace(s[start:end], "localhost.pem", "../evil.pem", 1) + s[end:]
			},
			want: []string{`../evil.pem`},
		},
		{
			name: "a manifest that is not YAML", file: "pods.yaml", stage: "decode",
			edit: func(s string) string { return "kind: Pod\nmetadata: [unclosed\n" + s },
			want: []string{"pods.yaml"},
			// The file's pods are what would change: another file's change is the test.
			other: "shop",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			good := e.settled(t)
			path := filepath.Join(e.dir, tc.file)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rejected := fmt.Sprintf(`haproxy_sidecar_rejected_total{stage=%q}`, tc.stage)
			before := e.metric(t, rejected)
			cfgBefore, _ := os.ReadFile(e.cfgPath)

			e.editFile(t, tc.file, tc.edit)
			var r readyz
			haproxytest.WaitFor(t, 15*time.Second, func() bool {
				_, r = e.readyz(t)
				return r.LastError != "" && e.metric(t, rejected) > before
			}, "the rejection is reported and counted")
			// What /readyz says: the last error and every held input's reason (one edit may
			// hold two inputs: a key renamed leaves a certificate without its key, and a key
			// without its certificate).
			said := r.LastError
			reasons := []string{r.LastError}
			for _, h := range r.Held {
				said += "\n" + h.Object + ": " + h.Reason
				reasons = append(reasons, h.Reason)
			}
			t.Logf("reported: %s", said)
			for _, want := range tc.want {
				if !strings.Contains(said, want) {
					t.Errorf("%q does not mention %q", said, want)
				}
			}
			if tc.at != "" {
				checkPosition(t, reasons, path, tc.at)
			}
			if strings.Contains(said, "PRIVATE KEY") || strings.Contains(said, "MII") {
				t.Errorf("error leaks key material: %q", said)
			}
			if !r.Ready || r.LiveConfig != good.LiveConfig {
				t.Errorf("live config is %q (ready %v), want the last good %q", r.LiveConfig, r.Ready, good.LiveConfig)
			}
			if v := e.metric(t, "haproxy_sidecar_config_valid"); v != 0 {
				t.Errorf("config_valid = %v after a rejection, want 0", v)
			}
			if cfgAfter, _ := os.ReadFile(e.cfgPath); string(cfgAfter) != string(cfgBefore) {
				t.Error("the configuration HAProxy reads changed")
			}
			if _, body, _, err := e.get("web.localhost", "/"); err != nil || !strings.HasPrefix(body, "web-") {
				t.Errorf("last good configuration not serving: %q, %v", body, err)
			}
			if cfg, _ := os.ReadFile(e.cfgPath); strings.Contains(string(cfg), "INJECTED") {
				t.Error("the injected line reached haproxy.cfg")
			}

			// Everything else keeps going live: another service's pod becomes ready.
			other := tc.other
			if other == "" {
				other = "api"
			}
			undo := func() {}
			if other != "none" {
				undo = e.podChange(t, other)
				haproxytest.WaitFor(t, 15*time.Second, func() bool {
					_, r = e.readyz(t)
					return len(r.Held) > 0 && r.LastError != ""
				}, "the bad input is still held after the other change")
			}

			// Fixing the input recovers.
			if err := os.WriteFile(path, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			undo()
			haproxytest.WaitFor(t, 15*time.Second, func() bool {
				_, r = e.readyz(t)
				// Inputs and pods as before: the configuration is the one before the case.
				return r.Ready && r.LastError == "" && len(r.Held) == 0 && e.metric(t, "haproxy_sidecar_config_valid") == 1 &&
					r.LiveConfig == good.LiveConfig
			}, "recovery once the input is fixed")
			e.waitServed(t, "web.localhost", "/", "web-")
		})
	}
}

// checkPosition checks that one of the reasons starts with path:LINE:, where line LINE of the
// file holds text: the position an editor or CI annotator would jump to.
func checkPosition(t *testing.T, reasons []string, path, text string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var at []string
	for _, r := range reasons {
		if at = regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:(\d+):`).FindStringSubmatch(r); at != nil {
			break
		}
	}
	if at == nil {
		t.Errorf("no reason of %q starts with %s:LINE:", reasons, path)
		return
	}
	n, _ := strconv.Atoi(at[1])
	if n < 1 || n > len(lines) || !strings.Contains(lines[n-1], text) {
		t.Errorf("%s:%d is not the line that holds %q", path, n, text)
	}
}

// podChange makes a pod of service (api or web) change and waits until it is served: the api
// pod that is not ready becomes ready (api-2 answers), or a third web pod appears (web-3);
// "shop" adds a service instead (for when pods.yaml is the file under test).
// The returned function takes the change back.
func (e *demoEnv) podChange(t *testing.T, service string) (undo func()) {
	t.Helper()
	file := "pods.yaml"
	if service == "shop" {
		file = "services.yaml"
	}
	path := filepath.Join(e.dir, file)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch service {
	case "api":
		e.editFile(t, "pods.yaml", func(s string) string {
			i := strings.Index(s, "name: api-5c6b-pqrst")
			tail := strings.Replace(s[i:], `status: "False"`, `status: "True"`, 1)
			return s[:i] + strings.Replace(tail, "ready: false", "ready: true", 1)
		})
		e.waitServed(t, "api.localhost", "/v1/x", "api-2")
	case "web":
		e.editFile(t, "pods.yaml", func(s string) string {
			return s + "\n---\n" + `apiVersion: v1
kind: Pod
metadata:
  name: web-7d9f-third
  namespace: demo
  labels:
    app: web
status:
  phase: Running
  podIP: 127.0.0.13
  conditions:
  - type: Ready
    status: "True"
`
		})
		e.waitServed(t, "web.localhost", "/", "web-3")
	case "shop":
		// Not a pod: a new service in services.yaml.
		e.editFile(t, "services.yaml", func(s string) string {
			return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
		})
		e.waitServed(t, "shop.localhost", "/", "api-1")
	default:
		t.Fatalf("no pod change for %q", service)
	}
	return func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBadInputAtStartWritesNothing: with no previous configuration and bad input, HAProxy gets
// nothing, /readyz says why, and the fix brings it up.
func TestBadInputAtStartWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "{%- for service in services %}", "{%- for service in %}", 1)
	})
	e.startSidecar(t)
	var r readyz
	var code int
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		code, r = e.readyz(t)
		return r.LastError != ""
	}, "the rejection is reported")
	if code != 503 || r.Ready {
		t.Errorf("readyz = %d ready=%v, want 503 not ready", code, r.Ready)
	}
	if !strings.Contains(r.LastError, `ConfigMap lb/config key "template"`) {
		t.Errorf("error %q does not name the template", r.LastError)
	}
	checkPosition(t, []string{r.LastError}, filepath.Join(e.dir, "config.yaml"), "{%- for service in %}")
	if _, err := os.Lstat(e.cfgPath); !os.IsNotExist(err) {
		t.Errorf("%s exists after a rejected first render (%v)", e.cfgPath, err)
	}
	if v := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`); v != 0 {
		t.Errorf("reloads = %v, want 0", v)
	}

	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "{%- for service in %}", "{%- for service in services %}", 1)
	})
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
}
