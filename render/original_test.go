package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

const originalExamples = "../../shared/reference/original-examples"

// loadConfigMapData reads the data of a ConfigMap manifest.
func loadConfigMapData(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(path, originalExamples) {
		// The original project's examples live beside the repository (shared/reference), as
		// in CI; a clone on its own cannot run these compatibility tests.
		t.Skipf("the original project's examples are not beside this clone: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind     string            `json:"kind"`
		Metadata map[string]string `json:"metadata"`
		Data     map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cm.Kind != "ConfigMap" {
		t.Fatalf("%s: kind %q, want ConfigMap", path, cm.Kind)
	}
	return cm.Data
}

// originalSnapshot builds the snapshot the golden files were rendered with (testdata/original
// /snapshot.json).
func originalSnapshot(t *testing.T, templates map[string]string, key string) *snapshot.Snapshot {
	t.Helper()
	b, err := os.ReadFile("testdata/original/snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		Services     []map[string]any  `json:"services"`
		Certificates []string          `json:"certificates"`
		Stats        map[string]string `json:"stats"`
		Env          map[string]string `json:"env"`
	}
	// Numbers as the snapshot (and Python's json module) decode them: integers are ints.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		t.Fatal(err)
	}
	for i, svc := range in.Services {
		in.Services[i] = pyNumbers(svc).(map[string]any)
	}
	s := &snapshot.Snapshot{
		Services:    serviceRecords(in.Services),
		Templates:   templates,
		TemplateKey: key,
		TemplateRef: snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"},
		Env:         in.Env,
		Stats:       snapshot.Stats{Username: in.Stats["username"], Password: in.Stats["password"], PasswordSet: true},
	}
	for _, c := range in.Certificates {
		s.Certificates = append(s.Certificates, snapshot.Certificate{Name: c, PEM: []byte("pem of " + c)})
	}
	return s
}

// TestOriginalExamples renders the original project's example templates unchanged and
// compares with what Jinja2 renders for the same input (testdata/original/gen.py).
func TestOriginalExamples(t *testing.T) {
	cases := []struct {
		file, key string
		lines     []string // lines that must be in the output
		absent    []string
	}{
		{file: "basic", key: "template", lines: []string{
			"  stats auth stats:s3cret",
			"  acl host_rule_1_1 hdr(host) -i admin.example.com",
			"  acl host_rule_2_2 hdr_reg(host) -i (www\\.)?api\\.example\\.org",
			"  acl host_rule_2_2_port hdr_reg(host) -i ^(www\\.)?api\\.example\\.org:80$",
			"  acl path_rule_2_1 path_reg -i ^/v1/",
			"  use_backend SERVICE_API if path_rule_2_1 host_rule_2_1 or path_rule_2_1 host_rule_2_1_port",
			"  use_backend SERVICE_SHOP if host_rule_3_2 or host_rule_3_2_port",
			"backend SERVICE_API",
			"  server API_1_1 10.0.1.1:8080 check",
			"  server API_1_2 10.0.1.1:8443 check",
			"  server API_2_1 10.0.1.2:8080 check",
			"  server API_2_2 10.0.1.2:8443 check",
			"  server SHOP_3_1 10.0.2.12:80 check",
			"  server ADMIN_1_1 10.0.3.7:9000 check",
		}, absent: []string{"API_3_", "8080.0", "frontend port_443"}},
		{file: "ssl", key: "template", lines: []string{
			"frontend port_443",
			"  bind :::443 v4v6 ssl crt /etc/haproxy/ssl/example.com.pem crt /etc/haproxy/ssl/shop.example.com.pem",
			"  reqadd X-Forwarded-Proto:\\ https",
			"  acl host_rule_2_1_port hdr(host) -i api.example.com:443",
			"  acl host_rule_3_1 hdr(host) -i shop.example.com",
			"  use_backend SERVICE_SHOP if host_rule_3_1 or host_rule_3_1_port",
			"  acl host_rule_1_1_port hdr(host) -i admin.example.com:80",
			"  server SHOP_1_1 10.0.2.10:80 check",
		}},
		{file: "varnish", key: "template", lines: []string{
			"  acl varnish_rule hdr(x-from-varnish) -m str v-secret",
			"  use_backend VARNISH if METH_GET !varnish_rule host_rule_3_1 or METH_GET !varnish_rule host_rule_3_1_port",
			"backend VARNISH",
			"  server VARNISH 10.0.9.9:80",
		}},
		{file: "varnish", key: "varnishtemplate", lines: []string{
			`  .host = "10.0.9.1";`,
			`  if (req.http.Host ~ "^(shop\.example\.com|www\.shop\-example\.com)$") {`,
			`    set req.http.Host = "shop.example.com";`,
			`    unset req.http.Cookie;`,
		}},
	}
	r := New(Options{SSLDir: "/etc/haproxy/ssl"})
	ran := 0 // examples rendered: none when they are not beside this clone (all skipped)
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.key, func(t *testing.T) {
			data := loadConfigMapData(t, filepath.Join(originalExamples, tc.file+".yaml"))
			ran++
			b, err := r.Render(context.Background(), originalSnapshot(t, data, tc.key))
			if err != nil {
				t.Fatal(err)
			}
			golden, err := os.ReadFile("testdata/original/" + tc.file + "." + tc.key + ".golden")
			if err != nil {
				t.Fatal(err)
			}
			// Render ends the file with a newline (Jinja2 drops the template's last one).
			want := string(golden)
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
			if got := string(b.Config); got != want {
				t.Errorf("output differs from Jinja2's:\n%s", lineDiff(want, got))
			}
			assertLines(t, string(b.Config), tc.lines, tc.absent)
			// Again with the same renderer, which takes the loops' iterations it kept.
			again, err := r.Render(context.Background(), originalSnapshot(t, data, tc.key))
			if err != nil {
				t.Fatal(err)
			}
			if string(again.Config) != want {
				t.Errorf("the second render differs from Jinja2's:\n%s", lineDiff(want, string(again.Config)))
			}
		})
	}
	if ran > 0 && r.kept.BodiesReused() == 0 {
		t.Error("no loop iteration of the original examples was reused by their second render")
	}
	t.Logf("%d loop iterations reused", r.kept.BodiesReused())
}

func assertLines(t *testing.T, out string, lines, absent []string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("missing line %q in:\n%s", l, out)
		}
	}
	for _, a := range absent {
		if strings.Contains(out, a) {
			t.Errorf("output contains %q:\n%s", a, out)
		}
	}
}

// lineDiff shows the first differing lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, quote(wl, i < len(w)), quote(gl, i < len(g)))
			if shown++; shown > 5 {
				break
			}
		}
	}
	return b.String()
}

func quote(s string, present bool) string {
	if !present {
		return "(none)"
	}
	return strconv.Quote(s)
}
