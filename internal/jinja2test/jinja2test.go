// Package jinja2test runs the real Jinja2 (Debian's python3-jinja2, which hack/install-deps.sh
// installs) for the tests that hold the template engine against it. A test is skipped when there
// is no python3 with jinja2, unless HAPROXY_SIDECAR_REQUIRE_TESTBINS=1.
package jinja2test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// RequireEnv=1 (set by `make test` and CI) turns a missing Jinja2 into a test failure instead
// of a skip.
const RequireEnv = "HAPROXY_SIDECAR_REQUIRE_TESTBINS"

// Python returns a python3 that imports jinja2: Debian's first (what make test installs), then
// PATH's.
func Python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import jinja2").Run() == nil {
			return path
		}
	}
	if os.Getenv(RequireEnv) != "" {
		t.Fatal("python3 with jinja2 is required (hack/install-deps.sh installs python3-jinja2)")
	}
	t.Skip("python3 with jinja2 is not installed (hack/install-deps.sh installs python3-jinja2)")
	return ""
}

// Results runs a script that asks Jinja2 about n things: req, as JSON, on its standard input;
// it writes {"version": Jinja2's version, "results": one a thing}. It fails the test unless
// there are n results.
func Results[R any](t testing.TB, script string, req any, n int) (results []R, version string) {
	t.Helper()
	var resp struct {
		Version string `json:"version"`
		Results []R    `json:"results"`
	}
	run(t, script, req, &resp)
	if len(resp.Results) != n {
		t.Fatalf("%s: %d results for %d", script, len(resp.Results), n)
	}
	return resp.Results, resp.Version
}

// run runs a Python script with req, as JSON, on its standard input, and decodes the JSON it
// writes into resp.
func run(t testing.TB, script string, req, resp any) {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Python(t), script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(out, resp); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}
