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
	"sync/atomic"
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
	var asked atomic.Int32 // chunks asked for so far
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		pprof.Profile(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	done := make(chan struct{})
	defer close(done)
	go burnCPU(done)

	file := filepath.Join(t.TempDir(), "cpu.prof")
	p := &Proxy{Metrics: strings.TrimPrefix(srv.URL, "http://")}
	stop := p.ProfileCPU(file)
	// Stopped once the second chunk is under way (asked for: the first is written), which stop
	// waits for. (Stopped when the first chunk's file appeared, it could come before the
	// second was asked for: one chunk, and a red test, on a loaded machine.)
	if err := WaitUntil("the second chunk", time.Minute, func() bool { return asked.Load() >= 2 }); err != nil {
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
	if d, err := profileDuration(string(out)); err != nil || d < 4*time.Second || !strings.Contains(string(out), "burnCPU") {
		t.Errorf("the merged profile is not two chunks of 2 s or more showing burnCPU (%v, %v):\n%s", d, err, out)
	}
}

// profileDuration is the "Duration: 4.02s," of pprof -top's header, to the hundredth of a
// second pprof prints (on a loaded machine a chunk of 2 s takes a little more: not whole
// seconds).
func profileDuration(top string) (time.Duration, error) {
	_, rest, ok := strings.Cut(top, "Duration: ")
	if !ok {
		return 0, fmt.Errorf("no Duration in pprof's output")
	}
	field, _, _ := strings.Cut(rest, ",")
	return time.ParseDuration(strings.TrimSpace(field))
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

func TestProfileDuration(t *testing.T) {
	for top, want := range map[string]time.Duration{
		"Type: cpu\nDuration: 4.02s, Total samples = 740ms (18.43%)\n": 4020 * time.Millisecond,
		"Duration: 4s, Total samples = 3.9s (97.5%)":                   4 * time.Second,
		"Duration: 10.5s, Total samples = 1s":                          10500 * time.Millisecond,
	} {
		if got, err := profileDuration(top); err != nil || got != want {
			t.Errorf("profileDuration(%q) = %v, %v; want %v", top, got, err, want)
		}
	}
	if _, err := profileDuration("Type: cpu"); err == nil {
		t.Error("a header without Duration: no error")
	}
}
