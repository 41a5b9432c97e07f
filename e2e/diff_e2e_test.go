package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// TestDiffAgainstARunningSidecar: diff --live against the state directory of a sidecar serving
// the demo: its inputs give nothing to do (0); a pod made ready is the runtime API's commands
// (1); a services key that does not parse is held as the sidecar would hold it (3).
func TestDiffAgainstARunningSidecar(t *testing.T) {
	e := servingDemo(t)
	e.settled(t)
	state := filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar")
	diff := func(dir string) (string, int) {
		t.Helper()
		cfg, err := config.ParseDiff([]string{"--live", state, "--haproxy-config", e.cfgPath, "--dir", dir,
			"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND"}, "", os.Getenv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		status, err := sidecar.Diff(context.Background(), cfg, &out, sidecar.Env{Log: testWriter{t}})
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), status
	}
	if out, status := diff(e.dir); status != sidecar.DiffSame {
		t.Fatalf("the live inputs: status %d\n%s", status, out)
	}

	proposed := t.TempDir()
	if err := copyDir(e.dir, proposed); err != nil {
		t.Fatal(err)
	}
	edit := func(file string, f func(string) string) {
		b, err := os.ReadFile(filepath.Join(proposed, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proposed, file), []byte(f(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("pods.yaml", func(s string) string {
		i := strings.Index(s, "name: api-5c6b-pqrst")
		tail := strings.Replace(s[i:], `status: "False"`, `status: "True"`, 1)
		return s[:i] + strings.Replace(tail, "ready: false", "ready: true", 1)
	})
	out, status := diff(proposed)
	if status != sidecar.DiffChanges || !strings.Contains(out, "through its runtime API, with no reload") || !strings.Contains(out, "add server be_api/api-5c6b-pqrst") {
		t.Errorf("a pod made ready: status %d\n%s", status, out)
	}
	edit("services.yaml", func(s string) string { return strings.Replace(s, `"ports": [`, `"ports": [[`, 1) })
	if out, status := diff(proposed); status != sidecar.DiffHeld || !strings.Contains(out, `ConfigMap lb/services key`) {
		t.Errorf("a bad services key: status %d\n%s", status, out)
	}
}

// TestDiffLiveEnvironment: diff --live against a sidecar that renders with a statistics
// password and HTTP_BIND, HTTPS_BIND and STATS_BIND: run without the password, with fewer
// variables allowed or another value, it refuses, naming what differs (never a value) and the
// flags the sidecar has; with --env-mismatch=warn it predicts for its own environment and says
// so, the running configuration's lines it cannot mask not shown; given the same, it predicts
// nothing to do. The state directory holds no value either.
func TestDiffLiveEnvironment(t *testing.T) {
	const password = "e2e-stats-password-Zq81"
	e := servingDemo(t, "--statistics-password", password)
	e.settled(t)
	t.Setenv("STATISTICS_PASSWORD", "") // the shell's: none
	state := filepath.Join(filepath.Dir(e.cfgPath), ".haproxy-sidecar")
	allow := []string{"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND"}
	diff := func(args ...string) (string, int, error) {
		t.Helper()
		out, status, err := diffRun(t, append([]string{"--live", state, "--haproxy-config", e.cfgPath, "--dir", e.dir}, args...)...)
		if err != nil {
			out = err.Error()
		}
		if strings.Contains(out, password) {
			t.Errorf("diff %q prints the password:\n%s", args, out)
		}
		return out, status, err
	}
	says := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: does not say %q:\n%s", what, w, out)
			}
		}
	}

	out, _, err := diff(allow...)
	if err == nil {
		t.Errorf("without the password: no error, want a refusal:\n%s", out)
	}
	says("without the password", out, "STATISTICS_PASSWORD is set for the running sidecar, not here", "--env-mismatch=warn")

	out, status, err := diff(append(allow, "--env-mismatch=warn")...)
	if err != nil || status != sidecar.DiffChanges {
		t.Errorf("--env-mismatch=warn: status %d, error %v, want %d", status, err, sidecar.DiffChanges)
	}
	says("--env-mismatch=warn", out, "WARNING: predicted with diff's environment, not the running sidecar's: STATISTICS_PASSWORD is set for the running sidecar, not here",
		"HAProxy would be reloaded", "-[not shown: it may hold the running sidecar's STATISTICS_PASSWORD]",
		"the running configuration's lines that the proposed one does not have are not shown")

	if out, status, err := diff(append(allow, "--statistics-password", password)...); err != nil || status != sidecar.DiffSame || strings.Contains(out, "WARNING") {
		t.Errorf("the same environment: status %d, error %v, want %d and no warning:\n%s", status, err, sidecar.DiffSame, out)
	}

	out, _, err = diff("--env-allow", "HTTP_BIND,HTTPS_BIND", "--statistics-password", password)
	if err == nil {
		t.Error("STATS_BIND not allowed: no error, want a refusal")
	}
	says("STATS_BIND not allowed", out, "STATS_BIND is set for the running sidecar, not here", "the running sidecar has --env-allow HTTP_BIND,HTTPS_BIND,STATS_BIND")

	t.Setenv("HTTP_BIND", "127.0.0.1:1") // the sidecar read its environment at start
	out, _, err = diff(append(allow, "--statistics-password", password)...)
	if err == nil {
		t.Error("another HTTP_BIND: no error, want a refusal")
	}
	says("another HTTP_BIND", out, "HTTP_BIND has another value here")

	b, err := os.ReadFile(filepath.Join(state, "environment.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), password) || strings.Contains(string(b), e.httpAddr) {
		t.Errorf("the state directory's record holds a value: %s", b)
	}
}

// diffRun is `haproxy-sidecar diff` with args (its environment twins from the process's):
// what it printed, its exit status, and the error it returned.
func diffRun(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	cfg, err := config.ParseDiff(args, "", os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	status, err := sidecar.Diff(context.Background(), cfg, &out, sidecar.Env{Log: testWriter{t}})
	return out.String(), status, err
}

// diffJSON is `haproxy-sidecar diff -o json` with args: its report and exit status.
func diffJSON(t *testing.T, args ...string) (diffReport, int) {
	t.Helper()
	out, status, err := diffRun(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("diff %q: %v", args, err)
	}
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff %q: %v\n%s", args, err, out)
	}
	return rep, status
}

// diffReport is what diff -o json prints.
type diffReport struct {
	Current, Proposed, Action, Why, Error string
	Held                                  []struct{ Input, Object, Reason string }
}
