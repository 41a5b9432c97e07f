//go:build unix

package generation

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLockKeepsASecondSidecarOut: a second lock on the same state directory fails at once,
// naming the holder's pid; once released, it can be taken again.
func TestLockKeepsASecondSidecarOut(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock2, err := Lock(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}
