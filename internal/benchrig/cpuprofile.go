package benchrig

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// profileChunk is the length in seconds of each CPU profile ProfileCPU asks for: the sidecar's
// /debug/pprof/profile cannot be stopped early, so the last chunk runs past stop by at most this.
const profileChunk = 2

// ProfileCPU starts a CPU profile of the sidecar (which runs with --pprof: Rig.Pprof) and returns
// the function that ends it and writes it to file. The profile is taken as back-to-back chunks of
// profileChunk seconds; stop waits for the chunk under way, so that nothing after it is profiled
// by one started before, and merges the chunks with `go tool pprof -proto` (go in PATH).
func (p *Proxy) ProfileCPU(file string) (stop func() error) {
	var (
		mu      sync.Mutex
		done    bool
		chunks  []string
		failure error
	)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// At least one chunk, however soon stop comes.
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s.%d", file, i)
			if err := p.profileChunk(name); err != nil {
				failure = err
				return
			}
			chunks = append(chunks, name)
			mu.Lock()
			d := done
			mu.Unlock()
			if d {
				return
			}
		}
	}()
	return func() error {
		mu.Lock()
		done = true
		mu.Unlock()
		<-finished
		if failure != nil {
			return fmt.Errorf("CPU profile: %w", failure)
		}
		return mergeProfiles(file, chunks)
	}
}

// profileChunk writes a CPU profile of the sidecar's next profileChunk seconds to file.
func (p *Proxy) profileChunk(file string) error {
	return p.savePprof(fmt.Sprintf("profile?seconds=%d", profileChunk), file)
}

// mergeProfiles writes the chunks merged into file and removes them.
func mergeProfiles(file string, chunks []string) error {
	if len(chunks) == 0 {
		return fmt.Errorf("CPU profile: no chunk taken")
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	var stderr strings.Builder
	cmd := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, chunks...)...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("merge the CPU profile's chunks (kept as %s.N): %w: %s", file, err, stderr.String())
	}
	for _, c := range chunks {
		os.Remove(c)
	}
	return nil
}

// Trace starts a Go execution trace of the sidecar's next d (it runs with --pprof: Rig.Pprof)
// into file, and returns what waits for its end: /debug/pprof/trace cannot be stopped early.
func (p *Proxy) Trace(file string, d time.Duration) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- p.savePprof(fmt.Sprintf("trace?seconds=%d", max(1, int(d.Seconds()))), file) }()
	return func() error { return <-done }
}
