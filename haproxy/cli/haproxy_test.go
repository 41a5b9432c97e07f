package cli_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/cli"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// "@1" commands sent from the moment HAProxy starts are answered, never left hanging: HAProxy
// 3.2.26 leaves some unanswered when they arrive while its first worker starts, unless the
// client waits for the master's load status first.
func TestWorkerCommandsWhileHAProxyStarts(t *testing.T) {
	bin := haproxytest.Binary(t)
	cfg := haproxytest.WriteFile(t, "", "haproxy.cfg", haproxytest.HTTPConfig(haproxytest.FreePort(t), haproxytest.Backend(t, "x"), ""))
	for run := range 10 {
		sock := filepath.Join(haproxytest.ShortTempDir(t), "master.sock")
		cmd := exec.Command(bin, "-W", "-S", sock+",level,admin", "-f", cfg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &cli.Client{Path: sock, Timeout: 3 * time.Second}
		var out string
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			start := time.Now()
			out, err = c.Command(context.Background(), "@1 show info")
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("run %d: @1 show info unanswered for %v while HAProxy starts", run, time.Since(start).Round(time.Millisecond))
			}
			if err == nil && strings.Contains(out, "Name: HAProxy") {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if err != nil || !strings.Contains(out, "Name: HAProxy") {
			t.Fatalf("run %d: @1 show info = %q, %v", run, out, err)
		}
	}
}
