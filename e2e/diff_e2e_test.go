package e2e

import (
	"bytes"
	"context"
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
