package benchrig

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ProfileCPU takes chunks until stopped, waits for the one under way, and merges them into one
// profile that shows what ran meanwhile; the chunks are removed.
func TestProfileCPUMergesItsChunks(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go in PATH to merge the chunks")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	done := make(chan struct{})
	defer close(done)
	go burnCPU(done)

	file := filepath.Join(t.TempDir(), "cpu.prof")
	p := &Proxy{Metrics: strings.TrimPrefix(srv.URL, "http://")}
	stop := p.ProfileCPU(file)
	// Stopped once the first chunk is written: the second, under way, is waited for.
	if err := WaitUntil("the first chunk", time.Minute, func() bool { _, err := os.Stat(file + ".0"); return err == nil }); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []string{file + ".0", file + ".1"} {
		if _, err := os.Stat(chunk); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", chunk, err)
		}
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v: %s", err, out)
	}
	// Two chunks at least: the first, and the one under way when stopped (on a loaded machine
	// the first may be seen late, when a third has started).
	var secs int
	if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "Duration: ")+len("Duration: "):]), "%ds", &secs); err != nil || secs < 4 || !strings.Contains(string(out), "burnCPU") {
		t.Errorf("the merged profile is not two chunks of 2 s or more showing burnCPU:\n%s", out)
	}
}

// burnCPU spins until done is closed. Not inlined: the profile must name it (under -race the
// go statement's wrapper took its place).
//
//go:noinline
func burnCPU(done <-chan struct{}) {
	x := 0
	for {
		select {
		case <-done:
			return
		default:
		}
		for i := range 100000 {
			x += i * i
		}
		_ = x
	}
}
