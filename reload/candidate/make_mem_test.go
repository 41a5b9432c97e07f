package candidate

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// countRenderer renders how many services there are: next to nothing allocated, so that what
// Make allocates around the rendering shows.
type countRenderer struct{}

func (countRenderer) Render(_ context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	b := &render.Bundle{Config: strconv.AppendInt(nil, int64(len(s.Services)), 10)}
	b.Hash = b.Content().Hash()
	return b, nil
}

// TestAPodEditsMakeCopiesNoInputs: a sync in which no operator input changed (a pod edit's),
// with changed template sets tried apart (as `run` does), allocates well under one copy of the
// inputs' list: the selection is the list itself, made once (not once for the trial and once
// for the rendering), and the snapshot reads its services there. Each copy was 1.8 MB at
// 10,000 services, three per sync.
func TestAPodEditsMakeCopiesNoInputs(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{Inputs: snapshot.Builder{Options: snapshot.Options{PodCache: &snapshot.PodCache{}}}, Renderer: countRenderer{},
		Store: store, Tried: func(string, time.Duration, error) {}})
	t.Cleanup(b.StopTrial)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%05d", i)
	}
	objs := objects("v1", names...)
	var q quarantine.State
	oneSync(t, b, &q, objs)

	cur := b.Decode(objs)
	per := allocs.PerRun(3, func() {
		if m := b.Make(context.Background(), objs, cur, &q, nil, false); m.Err != nil || string(m.Candidate.Bundle.Config) != strconv.Itoa(n) {
			t.Fatalf("make: %v", m.Err)
		}
	})
	list := uint64(n+1) * uint64(unsafe.Sizeof(snapshot.Input{}))
	if limit := list / 2; per > limit {
		t.Errorf("Make of %d unchanged inputs allocates %d bytes, want at most %d (half a copy of them, %d)", n+1, per, limit, list)
	}
	t.Logf("Make of %d unchanged inputs: %d bytes (a copy of them: %d)", n+1, per, list)
}
