package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestPasswordThatIsAFileNameLeavesPathsWhole: with STATISTICS_PASSWORD=services, an error
// about examples/local/services.yaml names the file whole in /readyz and the log.
func TestPasswordThatIsAFileNameLeavesPathsWhole(t *testing.T) {
	e := servingDemo(t, "--statistics-password", "services")
	e.editFile(t, "services.yaml", func(s string) string {
		return strings.Replace(s, `"selector": {"app": "web"},`, `"selector": {"app": "web"}`, 1)
	})
	var r readyz
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) > 0
	}, "the services key is held")
	path := filepath.Join(e.dir, "services.yaml") + ":"
	if !strings.Contains(r.Held[0].Reason, path) || strings.Contains(r.Held[0].Reason, "[REDACTED].yaml") {
		t.Errorf("/readyz does not name %s whole: %q", path, r.Held[0].Reason)
	}
	haproxytest.WaitFor(t, 5*time.Second, func() bool { return strings.Contains(e.logs.String(), path) }, "the log names the file whole")
	if strings.Contains(e.logs.String(), "[REDACTED].yaml") {
		t.Error("the log mangles the path")
	}
}
