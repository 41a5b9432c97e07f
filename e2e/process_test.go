package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// sidecarBinary builds haproxy-sidecar into the test's temporary directory: signals are sent to
// a process, not to the in-process sidecar runSidecar starts.
func sidecarBinary(t *testing.T) string {
	t.Helper()
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	bin := filepath.Join(t.TempDir(), "haproxy-sidecar")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the sidecar: %v\n%s", err, out)
	}
	return bin
}

// sidecarProcess is `haproxy-sidecar run` as a process of its own.
type sidecarProcess struct {
	cmd  *exec.Cmd
	logs *haproxytest.SyncBuffer
	done chan struct{} // closed once it has exited; cmd.ProcessState is then set
}

// startSidecarProcess runs bin with run's args, in the test's environment and env (NAME=VALUE,
// which win); it is killed when the test ends, if still running.
func startSidecarProcess(t *testing.T, bin string, env []string, args ...string) *sidecarProcess {
	t.Helper()
	p := &sidecarProcess{cmd: exec.Command(bin, append([]string{"run"}, args...)...), logs: &haproxytest.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("the sidecar's log:\n%s", p.logs)
		}
	})
	return p
}

func (p *sidecarProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v to the sidecar: %v", sig, err)
	}
}

func (p *sidecarProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitedWithin reports whether the process exited within bound.
func (p *sidecarProcess) exitedWithin(bound time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(bound):
		return false
	}
}
