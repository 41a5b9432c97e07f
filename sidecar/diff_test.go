package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// runDiff runs diff with args; it returns what it printed and the exit status.
func runDiff(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cfg, err := config.ParseDiff(args, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	status, err := Diff(context.Background(), cfg, &out, Env{Log: io.Discard})
	if err != nil {
		t.Fatalf("diff %q: %v", args, err)
	}
	return out.String(), status
}

// TestDiffAgainstManifests: diff of a proposed directory against --base: unchanged is 0; a pod
// address changed is the runtime API's commands; a new service is a reload naming the new
// backend; a services key that does not parse is 3, naming the key.
func TestDiffAgainstManifests(t *testing.T) {
	needHAProxy(t)
	base := "../examples/local"
	t.Run("unchanged", func(t *testing.T) {
		out, status := runDiff(t, "--base", base, "--dir", base)
		if status != DiffSame || !strings.Contains(out, "HAProxy would get nothing") {
			t.Errorf("status %d:\n%s", status, out)
		}
	})
	t.Run("a pod's address: the runtime API", func(t *testing.T) {
		dir := example(t)
		edit(t, filepath.Join(dir, "pods.yaml"), "podIP: 127.0.0.12", "podIP: 127.0.0.19")
		out, status := runDiff(t, "--base", base, "--dir", dir)
		for _, want := range []string{"-  server web-7d9f-fghij-8080 127.0.0.12:8080", "+  server web-7d9f-fghij-8080 127.0.0.19:8080",
			"through its runtime API, with no reload", "set server be_web/web-7d9f-fghij-8080 addr 127.0.0.19 port 8080"} {
			if !strings.Contains(out, want) {
				t.Errorf("does not say %q:\n%s", want, out)
			}
		}
		if status != DiffChanges {
			t.Errorf("status %d, want %d", status, DiffChanges)
		}
	})
	t.Run("a new service: a reload, and why", func(t *testing.T) {
		dir := example(t)
		edit(t, filepath.Join(dir, "services.yaml"), "  api: |", "  shop: |\n    {\"namespace\": \"demo\", \"selector\": {\"app\": \"api\"}, \"hostnames\": [\"shop.localhost\"], \"ports\": [8080]}\n  api: |")
		out, status := runDiff(t, "--base", base, "--dir", dir, "-o", "json")
		var rep diffReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if status != DiffChanges || rep.Action != "reload" || !strings.Contains(rep.Why, `backend "be_shop" is new`) ||
			len(rep.Files) != 1 || !strings.Contains(rep.Files[0].Diff, "+backend be_shop") {
			t.Errorf("status %d, %+v", status, rep)
		}
	})
	t.Run("a services key that does not parse: held, 3", func(t *testing.T) {
		dir := example(t)
		edit(t, filepath.Join(dir, "services.yaml"), `"ports": [8080],`, `"ports": [8080,`)
		out, status := runDiff(t, "--base", base, "--dir", dir)
		if status != DiffHeld || !strings.Contains(out, `ConfigMap lb/services key "web" line 6`) {
			t.Errorf("status %d:\n%s", status, out)
		}
	})
	t.Run("a services key given with -f that does not parse: held, at its line in that file", func(t *testing.T) {
		over := filepath.Join(t.TempDir(), "services.yaml")
		if err := os.WriteFile(over, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\ndata:\n  web: |\n    {\"namespace\": \"demo\",\n     \"selector\": }\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, status := runDiff(t, "--base", base, "--dir", base, "-f", over)
		if want := over + `:7:18: decode: ConfigMap lb/services key "web" line 2 column 14: invalid JSON`; status != DiffHeld || !strings.Contains(out, want) {
			t.Errorf("status %d, want %d and %s:\n%s", status, DiffHeld, want, out)
		}
	})
	t.Run("-f overlays an object, --delete takes one out", func(t *testing.T) {
		over := filepath.Join(t.TempDir(), "pod.yaml")
		if err := os.WriteFile(over, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: api-5c6b-pqrst\n  namespace: demo\n  labels: {app: api}\n"+
			"status:\n  podIP: 127.0.0.22\n  conditions:\n  - {type: Ready, status: \"True\"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := runDiff(t, "--base", base, "--dir", base, "-f", over, "--delete", "Pod/demo/web-7d9f-abcde")
		for _, want := range []string{"add server be_api/api-5c6b-pqrst-8080 127.0.0.22:8080", "del server be_web/web-7d9f-abcde-8080"} {
			if !strings.Contains(out, want) {
				t.Errorf("does not say %q:\n%s", want, out)
			}
		}
	})
}
