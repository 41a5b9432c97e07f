package render

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// python3 finds a Python with Jinja2: Debian's first (what make test installs), then PATH's.
func python3(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import jinja2").Run() == nil {
			return path
		}
	}
	if os.Getenv("HAPROXY_SIDECAR_REQUIRE_TESTBINS") != "" {
		t.Fatal("python3 with jinja2 is required (hack/install-deps.sh installs python3-jinja2)")
	}
	t.Skip("python3 with jinja2 is not installed (hack/install-deps.sh installs python3-jinja2)")
	return ""
}

// TestDefaultTemplateAsJinja2: the built-in template renders byte for byte as the real Jinja2
// renders it, with and without a password, certificates and environment settings.
func TestDefaultTemplateAsJinja2(t *testing.T) {
	py := python3(t)
	for _, tc := range []struct {
		name  string
		stats snapshot.Stats
		certs bool
		env   map[string]string
	}{
		{"everything", snapshot.Stats{Username: "stats", Password: `pa ss"$word`, PasswordSet: true}, true,
			map[string]string{"HTTP_BIND": ":8080", "STATS_BIND": "127.0.0.1:9000", "HTTPS_BIND": "", "STATS_SOCKET": "/run/haproxy.sock",
				"METRICS_BIND": ":8405", "HARD_STOP_AFTER": "45s"}},
		{"no password no certificates", snapshot.Stats{Username: "stats"}, false, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(nil, "")
			s.Stats, s.Env = tc.stats, tc.env
			setField(s, 0, "check_path", "/healthz")
			if !tc.certs {
				s.Certificates = nil
			}
			b, err := New(Options{SSLDir: "/ssl"}).Render(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			ctx := map[string]any{"services": s.Services, "ssldir": "/ssl", "env": s.Env, "certificates": []string{},
				"stats": map[string]any{"username": s.Stats.Username}}
			if tc.stats.PasswordSet {
				ctx["stats"].(map[string]any)["password"] = tc.stats.Password
			}
			for _, c := range s.Certificates {
				ctx["certificates"] = append(ctx["certificates"].([]string), c.Name)
			}
			req, err := json.Marshal(map[string]any{"templates": templates.Default, "main": templates.DefaultKey, "context": record.Plain(ctx)})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, "testdata/jinja2/render_set.py")
			cmd.Stdin = bytes.NewReader(req)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("jinja2: %v\n%s", err, stderr.String())
			}
			if got := strings.TrimSuffix(string(b.Config), "\n"); got != string(want) {
				t.Errorf("differs from Jinja2's:\n%s", lineDiff(string(want), got))
			}
		})
	}
}
