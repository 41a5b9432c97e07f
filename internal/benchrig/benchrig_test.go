//go:build unix

package benchrig

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A process that ends by itself is seen through Done; StopProcess stops one that runs, and the
// rig's Stop leaves it alone after that.
func TestDoneAndStopProcess(t *testing.T) {
	r, err := New("benchrig-test", false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	exits, err := r.Spawn("exits.log", "sh", nil, "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done(exits):
	case <-time.After(10 * time.Second):
		t.Fatal("sh -c 'exit 3' not done after 10 s")
	}
	if code := exits.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	sleeps, err := r.Spawn("sleeps.log", "sleep", nil, "60")
	if err != nil {
		t.Fatal(err)
	}
	done := r.Done(sleeps)
	select {
	case <-done:
		t.Fatal("sleep 60 done at once")
	default:
	}
	t0 := time.Now()
	r.StopProcess(sleeps)
	select {
	case <-done:
	default:
		t.Fatal("StopProcess returned before the process ended")
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("StopProcess took %v: SIGTERM should end sleep at once", d)
	}
	r.mu.Lock()
	n := len(r.procs)
	r.mu.Unlock()
	if n != 1 {
		t.Errorf("%d processes left to Stop, want 1 (the one that exited)", n)
	}
}

// RunIn puts the run directory under another directory (a memory-backed one, in a bench), and
// Stop removes it with the work directory.
func TestRunInIsRemovedByStop(t *testing.T) {
	parent := t.TempDir()
	r, err := New("benchrig-test", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunIn(parent); err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(r.Run) != parent {
		t.Fatalf("run directory %s, want one in %s", r.Run, parent)
	}
	if _, err := os.Stat(r.Run); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	for _, dir := range []string{r.Run, r.Dir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s after Stop: %v, want it removed", dir, err)
		}
	}
}
