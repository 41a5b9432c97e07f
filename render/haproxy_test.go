package render

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

func selfSigned(t *testing.T, host string) []byte { return testcert.Combined(t, host) }

// haproxyCheck writes the bundle (config and certificates in ssldir) and runs haproxy -c on it.
func haproxyCheck(t *testing.T, b *Bundle, sslDir string) {
	t.Helper()
	bin := haproxytest.Binary(t) // skips, or fails when a version is required
	for name, pem := range b.Certificates {
		if err := os.WriteFile(filepath.Join(sslDir, name+".pem"), pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, b.Config, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-c", "-f", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("haproxy -c: %v\n%s\nconfig:\n%s", err, out, numbered(b.Config))
	}
	if strings.Contains(string(out), "[WARNING]") {
		t.Errorf("haproxy -c warns:\n%s\nconfig:\n%s", out, numbered(b.Config))
	}
}

func numbered(cfg []byte) string {
	var b strings.Builder
	for i, l := range strings.Split(string(cfg), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

// exampleSnapshot is testSnapshot with real certificates.
func exampleSnapshot(t *testing.T, templates map[string]string, stats snapshot.Stats, certs bool) *snapshot.Snapshot {
	s := testSnapshot(templates, "template")
	s.Stats = stats
	s.Certificates = nil
	if certs {
		s.Certificates = []snapshot.Certificate{
			{Name: "example.com", PEM: selfSigned(t, "api.example.com")},
			{Name: "shop.example.com", PEM: selfSigned(t, "shop.example.com")},
		}
	}
	return s
}

func TestExamplesPassHAProxyCheck(t *testing.T) {
	files, err := filepath.Glob("../examples/templates/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	withPassword := snapshot.Stats{Username: "stats", Password: `pa ss"$word`, PasswordSet: true}
	for _, file := range files {
		if raw, _ := os.ReadFile(file); strings.Contains(string(raw), "--watch") {
			continue // reads watched resources: checked end to end with them (nodeport_e2e_test.go)
		}
		if filepath.Base(file) == "multicluster.yaml" {
			continue // pods of several clusters: its tests in the config (sidecar's TestMulticlusterExampleTests)
		}
		data := loadConfigMapData(t, file)
		for _, tc := range []struct {
			name  string
			stats snapshot.Stats
			certs bool
		}{
			{"with password and certificates", withPassword, true},
			{"no password no certificates", snapshot.Stats{Username: "stats"}, false},
		} {
			t.Run(filepath.Base(file)+"/"+tc.name, func(t *testing.T) {
				sslDir := t.TempDir()
				b, err := New(Options{SSLDir: sslDir}).Render(context.Background(), exampleSnapshot(t, data, tc.stats, tc.certs))
				if err != nil {
					t.Fatal(err)
				}
				out := string(b.Config)
				lines := []string{
					"backend be_api", "backend be_shop", "backend be_web",
					"  server api-a-8080 10.0.1.1:8080 check",
					"  server api-d-8443 10.0.1.4:8443 check",
					"  server shop-1-80 10.0.2.11:80 check",
					"  server web-0-80 [fd00::10]:80 check",
				}
				assertLines(t, out, lines, []string{"8080.0", "80.0"})
				if got := strings.Count(out, "  server "); got != 4*2+2+1 {
					t.Errorf("%d server lines, want one per ready pod and port (11)", got)
				}
				for _, want := range []string{"api.example.com", `^(www\.)?api\.example\.org$`, "^/v1/", "use_backend be_api", "use_backend be_web"} {
					if !strings.Contains(out, want) {
						t.Errorf("no %q in:\n%s", want, out)
					}
				}
				if has := strings.Contains(out, "stats auth"); has != tc.stats.PasswordSet {
					t.Errorf("stats page present: %v, want %v", has, tc.stats.PasswordSet)
				}
				wantTLS := tc.certs && filepath.Base(file) != "basic.yaml" && filepath.Base(file) != "peers.yaml" // plain HTTP
				if has := strings.Contains(out, " ssl crt "+sslDir+"/example.com.pem crt "+sslDir+"/shop.example.com.pem"); has != wantTLS {
					t.Errorf("TLS frontend with both certificates present: %v, want %v", has, wantTLS)
				}
				haproxyCheck(t, b, sslDir)
			})
		}
	}
}

func TestDefaultTemplate(t *testing.T) {
	withPassword := snapshot.Stats{Username: "stats", Password: `pa ss"$word`, PasswordSet: true}
	cases := []struct {
		name   string
		stats  snapshot.Stats
		certs  bool
		env    map[string]string
		lines  []string
		absent []string
	}{
		{name: "everything", stats: withPassword, certs: true,
			env: map[string]string{"HTTP_BIND": ":8080", "STATS_BIND": "127.0.0.1:9000", "HTTPS_BIND": ""},
			lines: []string{
				"    hard-stop-after 30s",
				"    option idle-close-on-response",
				"    option redispatch",
				"    option forwardfor",
				"frontend stats",
				"    bind 127.0.0.1:9000",
				`    stats auth "stats:pa ss\"\$word"`,
				"frontend http",
				"    bind :8080",
				`    use_backend be_api if { hdr(host),field(1,:) -i api.example.com } { path_reg ^/v1/ }`,
				`    use_backend be_api if { hdr(host),field(1,:) -m reg -i ^(www\.)?api\.example\.org$ } { path_reg ^/v1/ }`,
				"    use_backend be_shop if { hdr(host),field(1,:) -i shop.example.com }",
				"    use_backend be_web if { hdr(host),field(1,:) -i www.example.com example.com }",
				"    default_backend be_web",
				"frontend https",
				"    bind :443 ssl crt SSLDIR/example.com.pem crt SSLDIR/shop.example.com.pem alpn h2,http/1.1",
				"backend be_api",
				"    server api-a-8080 10.0.1.1:8080 check",
				"    server api-a-8443 10.0.1.1:8443 check",
				"    server api-d-8443 10.0.1.4:8443 check",
				"backend be_shop",
				"    server shop-0-80 10.0.2.10:80 check",
				"backend be_web",
				"    server web-0-80 [fd00::10]:80 check",
			}},
		{name: "no password no certificates", stats: snapshot.Stats{Username: "stats"},
			lines:  []string{"frontend http", "    bind :80", "backend be_shop"},
			absent: []string{"frontend stats", "stats auth", "frontend https", "ssl crt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sslDir := t.TempDir()
			s := exampleSnapshot(t, nil, tc.stats, tc.certs)
			s.Env = tc.env
			b, err := New(Options{SSLDir: sslDir}).Render(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			out := string(b.Config)
			for i, l := range tc.lines {
				tc.lines[i] = strings.ReplaceAll(l, "SSLDIR", sslDir)
			}
			assertLines(t, out, tc.lines, tc.absent)
			// Path rules come before host-only rules.
			if strings.Index(out, "be_api if") > strings.Index(out, "be_shop if") {
				t.Error("a host-only rule comes before a path rule")
			}
			if got := strings.Count(out, "    server "); got != 11 {
				t.Errorf("%d server lines, want 11", got)
			}
			haproxyCheck(t, b, sslDir)
		})
	}
}
