package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// example is a copy of examples/local to change.
func example(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("cp", "-r", "../examples/local/.", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("copy the example: %v %s", err, out)
	}
	return dir
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runOnce runs render or validate with args; it returns what it printed and its error.
func runOnce(t *testing.T, cmd string, args ...string) (string, error) {
	t.Helper()
	cfg, err := config.ParseOnce(cmd, args, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Once(context.Background(), cfg, &out, Env{Log: io.Discard})
	return out.String(), err
}

func needHAProxy(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy is not installed")
	}
}

// TestRenderWritesTheValidatedGeneration: render writes the files of the generation it
// validated, as plain files.
func TestRenderWritesTheValidatedGeneration(t *testing.T) {
	needHAProxy(t)
	out := t.TempDir()
	said, err := runOnce(t, "render", "--dir", "../examples/local", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said, "wrote "+filepath.Join(out, "haproxy.cfg")+" and 1 certificate(s)") {
		t.Errorf("said %q", said)
	}
	cfg, err := os.ReadFile(filepath.Join(out, "haproxy.cfg"))
	if err != nil || !strings.Contains(string(cfg), "crt "+filepath.Join(out, "certs")) {
		t.Fatalf("haproxy.cfg does not name the certificates written beside it (%v):\n%s", err, cfg)
	}
	if fi, err := os.Lstat(filepath.Join(out, "certs", "localhost.pem")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the certificate is not a plain file: %v %v", fi, err)
	}
	if out, err := exec.Command("haproxy", "-c", "-f", filepath.Join(out, "haproxy.cfg")).CombinedOutput(); err != nil {
		t.Errorf("haproxy -c on what render wrote: %v\n%s", err, out)
	}
}

// TestValidatePrintsOneHash: the same inputs give the same hash every time.
func TestValidatePrintsOneHash(t *testing.T) {
	needHAProxy(t)
	hash := regexp.MustCompile(`hash ([0-9a-f]{12})`)
	first, err := runOnce(t, "validate", "--dir", "../examples/local")
	if err != nil || !hash.MatchString(first) {
		t.Fatalf("%q, %v", first, err)
	}
	again, err := runOnce(t, "validate", "--dir", "../examples/local")
	if err != nil || hash.FindString(again) != hash.FindString(first) {
		t.Errorf("%q then %q (%v): the hash moved", first, again, err)
	}
}

// TestEveryErrorAtOnce: a broken service and a broken template are both named, each with its
// object, key and line.
func TestEveryErrorAtOnce(t *testing.T) {
	needHAProxy(t)
	dir := example(t)
	edit(t, filepath.Join(dir, "services.yaml"), `"ports": [8080],`, `"ports": [8080,`)
	edit(t, filepath.Join(dir, "config.yaml"), "log stderr", "{% if %}log stderr")
	_, err := runOnce(t, "validate", "--dir", dir)
	if err == nil {
		t.Fatal("validate passed")
	}
	for _, want := range []string{`ConfigMap lb/services key "web" line 6`, `ConfigMap lb/config key "template" line 2`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestAFailingTestIsNamedAtFirst: when nothing has a last good version yet, a failing test of
// the templates is what validate reports, naming the test, even when the rendering without the
// other new inputs fails for another reason (a default backend no service makes then).
func TestAFailingTestIsNamedAtFirst(t *testing.T) {
	needHAProxy(t)
	dir := example(t)
	edit(t, filepath.Join(dir, "config.yaml"), "    frontend http\n", "    frontend http\n      default_backend be_web\n")
	edit(t, filepath.Join(dir, "config.yaml"), `- contains: "backend be_shop"`, `- contains: "backend be_nope"`)
	_, err := runOnce(t, "validate", "--dir", dir)
	if err == nil {
		t.Fatal("validate passed")
	}
	if !strings.Contains(err.Error(), `test routes: expect[0]: haproxy.cfg does not contain "backend be_nope"`) || strings.Contains(err.Error(), "default_backend") {
		t.Errorf("%v: want the test's failure", err)
	}
}

// TestValidationWithoutHAProxyFails: with validation on and no haproxy, render and validate
// fail (a CI step must not pass on what it could not check), saying how to skip it.
func TestValidationWithoutHAProxyFails(t *testing.T) {
	for _, cmd := range []string{"render", "validate"} {
		args := []string{"--dir", "../examples/local", "--haproxy-bin", filepath.Join(t.TempDir(), "no-haproxy")}
		if cmd == "render" {
			args = append(args, "--out", t.TempDir())
		}
		if _, err := runOnce(t, cmd, args...); err == nil || !strings.Contains(err.Error(), "--validate=false") {
			t.Errorf("%s: %v", cmd, err)
		}
		out, err := runOnce(t, cmd, append(args, "--validate=false")...)
		if err != nil {
			t.Errorf("%s --validate=false: %v", cmd, err)
		}
		// Nothing claims what was not checked: the example's test asks for valid: true.
		if !strings.Contains(out, "test routes: ok, but valid: true not checked (--validate=false)") || strings.Contains(out, "test routes: ok\n") {
			t.Errorf("%s --validate=false says of the test:\n%s", cmd, out)
		}
		if cmd == "validate" && (strings.Contains(out, "\nvalid:") || strings.HasPrefix(out, "valid:") || !strings.Contains(out, "rendered, not validated (--validate=false): ")) {
			t.Errorf("validate --validate=false says:\n%s", out)
		}
	}
}

// TestValidateRunsTheTemplatesTests: validate prints each test of the templates; a failing one
// fails it, naming the test, its key and the assertion.
func TestValidateRunsTheTemplatesTests(t *testing.T) {
	needHAProxy(t)
	out, err := runOnce(t, "validate", "--dir", "../examples/local")
	if err != nil || !strings.Contains(out, "test routes: ok") {
		t.Fatalf("%q, %v", out, err)
	}
	dir := example(t)
	edit(t, filepath.Join(dir, "config.yaml"), `10\.1\.2\.3:9000 check'`, `10\.1\.2\.4:9000 check'`)
	_, err = runOnce(t, "validate", "--dir", dir)
	// Where the failing assertion is written: in the file, and in the key.
	at, _ := position(t, filepath.Join(dir, "config.yaml"), "- matches: 'server shop-1-9000")
	want := fmt.Sprintf(`%s: test: ConfigMap lb/config key "tests.routes.yaml" line 15: test routes: expect[1]: haproxy.cfg does not match`, at)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a failing test: %v\nwant %s...", err, want)
	}
}

// position is where text first is in the file at path: "PATH:LINE", and its column.
func position(t *testing.T, path, text string) (string, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if col := strings.Index(line, text); col >= 0 {
			return fmt.Sprintf("%s:%d", path, i+1), col + 1
		}
	}
	t.Fatalf("%s does not hold %q", path, text)
	return "", 0
}

// TestEveryErrorWithItsFileAndLine: validate on manifests with a broken service and a
// template whose {% if %} is never closed prints both errors, each on a line of its own that
// starts with the file, line and column (FILE:LINE:COL, where editors and CI annotators look)
// of what is wrong, and still names the object, key and line inside the key.
func TestEveryErrorWithItsFileAndLine(t *testing.T) {
	needHAProxy(t)
	dir := example(t)
	edit(t, filepath.Join(dir, "services.yaml"), `"selector": {"app": "web"},`, `"selector": {"app": "web"}`)
	edit(t, filepath.Join(dir, "config.yaml"), "      stats auth {{ stats.username }}:{{ stats.password }}\n    {% endif %}\n",
		"      stats auth {{ stats.username }}:{{ stats.password }}\n")
	_, err := runOnce(t, "validate", "--dir", dir)
	if err == nil {
		t.Fatal("validate passed")
	}
	// The JSON breaks at the next key, the if opens at its name.
	service, col := position(t, filepath.Join(dir, "services.yaml"), `"hostnames": ["web.localhost"`)
	service += fmt.Sprintf(":%d: ", col)
	template, col := position(t, filepath.Join(dir, "config.yaml"), "{% if stats.password %}")
	template += fmt.Sprintf(":%d: ", col+3)
	lines := strings.Split(err.Error(), "\n")
	for _, want := range []string{
		service + `decode: ConfigMap lb/services key "web" line 4 column 3: invalid JSON`,
		template + `render: ConfigMap lb/config key "template" line 21 column 4: {% if %} is never closed: expected {% elif %} or {% else %} or {% endif %}`,
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no line starts with\n%s\nin\n%s", want, err)
		}
	}
	var rejected *Rejected
	if !errors.As(err, &rejected) {
		t.Errorf("%T is not a *Rejected: main would print it behind its own name", err)
	}
}

// TestValidatePrintsHAProxysWarnings: a configuration HAProxy accepts with warnings is valid,
// and validate says them (a CI log shows what haproxy -c would have said).
func TestValidatePrintsHAProxysWarnings(t *testing.T) {
	needHAProxy(t)
	dir := example(t)
	edit(t, filepath.Join(dir, "config.yaml"), "      timeout client 30s\n", "")
	out, err := runOnce(t, "validate", "--dir", dir)
	if err != nil || !strings.Contains(out, "warning: haproxy -c: missing timeouts for frontend 'http'") {
		t.Errorf("%q, %v", out, err)
	}
	if out, _ := runOnce(t, "validate", "--dir", "../examples/local"); strings.Contains(out, "warning") {
		t.Errorf("the example warns: %q", out)
	}
}
