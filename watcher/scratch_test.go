package watcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
)

// TestPodEditRereadAllocatesLittle: a re-read of a big List after one pod's edit decodes that
// pod and makes what it hands out (the pods' list, the file's kept results: 8 bytes a pod
// each) and little more. The jobs, the set of the objects seen and the streaming window are
// the last read's (readScratch), not made again: 35 bytes a pod and the window more.
func TestPodEditRereadAllocatesLittle(t *testing.T) {
	const services, perService = 1000, 10 // a 6 MB List: streamed
	const pods = services * perService
	dir := t.TempDir()
	writeScale(t, dir, services, perService)
	path := filepath.Join(dir, "pods.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ready := []byte(`"ready":true`)
	at := bytes.Index(data, ready)
	versions := [2][]byte{data, bytes.Join([][]byte{data[:at], []byte(`"ready":false`), data[at+len(ready):]}, nil)}
	f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, MaxFileSize: -1,
		now: func() time.Time { return time.Now().Add(time.Hour) }} // no file is racy: only pods.json is read again
	read(t, f)
	edits := 0
	per := allocs.PerRun(2, func() {
		edits++
		if err := os.WriteFile(path, versions[edits%2], 0o644); err != nil {
			t.Fatal(err)
		}
		o := read(t, f)
		if f.last.parsed != 1 || f.work.decoded != 1 || len(o.ConvertedPods) != pods {
			t.Fatalf("a pod edited: %d files parsed, %d objects decoded, %d pods; want 1, 1, %d", f.last.parsed, f.work.decoded, len(o.ConvertedPods), pods)
		}
	})
	// Measured: 0.2 MB; 0.85 MB with the scratch made again (0.45 MB with only the jobs or the
	// window made again, 0.35 MB with only the seen set).
	if limit := uint64(16*pods + 128<<10); per > limit {
		t.Errorf("a re-read of %d pods after an edit of one allocates %d bytes, want at most %d", pods, per, limit)
	}
	t.Logf("a re-read of %d pods after an edit of one allocates %d bytes", pods, per)
}
