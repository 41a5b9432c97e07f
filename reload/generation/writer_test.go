package generation

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

var errRejected = errors.New("haproxy -c: bad")

// gatedCheck rejects configurations "bad"; with a gate, each check waits until it is closed.
type gatedCheck struct {
	mu      sync.Mutex
	gate    chan struct{}
	started chan string
}

func (c *gatedCheck) check(ctx context.Context, g *Generation) error {
	b, _ := os.ReadFile(g.ConfigFile())
	c.mu.Lock()
	gate, started := c.gate, c.started
	c.mu.Unlock()
	if started != nil {
		started <- string(b)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if string(b) == "bad" {
		return errRejected
	}
	return nil
}

func isRejected(err error) bool { return errors.Is(err, errRejected) }

func liveConfig(t *testing.T, s *Store) string {
	t.Helper()
	g := s.Live()
	if g == nil {
		return ""
	}
	b, err := os.ReadFile(g.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWriterLatestWins: while one rendering is checked, the newer ones queued replace each
// other; the one being checked is not made live (a newer one is queued), the latest is.
func TestWriterLatestWins(t *testing.T) {
	s := open(t, newEnv(t))
	c := &gatedCheck{gate: make(chan struct{}), started: make(chan string, 8)}
	done := make(chan Written, 8)
	w := NewWriter(s, c.check, isRejected, func(x Written) { done <- x }, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	for !w.Queue(&WriteJob{Hash: "h1", Content: Content{Config: []byte("one")}}) {
		time.Sleep(time.Millisecond) // Run has not started yet
	}
	if got := <-c.started; got != "one" {
		t.Fatalf("checking %q", got)
	}
	w.Queue(&WriteJob{Hash: "h2", Content: Content{Config: []byte("two")}})
	w.Queue(&WriteJob{Hash: "h3", Content: Content{Config: []byte("three")}})
	close(c.gate) // every check passes from now on
	first := <-done
	if !first.Superseded || first.Gen != nil {
		t.Errorf("the rendering checked while newer ones were queued: %+v", first)
	}
	last := <-done
	if last.Job.Hash != "h3" || last.Gen == nil || liveConfig(t, s) != "three" {
		t.Errorf("the latest was not made live: %+v, live %q", last, liveConfig(t, s))
	}
}

// TestWriterRejected: a rendering the check refuses is told apart from a failure and not
// made live.
func TestWriterRejected(t *testing.T) {
	s := open(t, newEnv(t))
	w := NewWriter(s, (&gatedCheck{}).check, isRejected, func(Written) {}, time.Second)
	res := w.WriteNow(context.Background(), &WriteJob{Hash: "bad1", Content: Content{Config: []byte("bad")}})
	if res.Rejected == nil || res.Gen != nil || s.Live() != nil {
		t.Fatalf("%+v, live %v", res, s.Live())
	}
	if res.Err != nil {
		t.Errorf("a rejection is also a failure: %v", res.Err)
	}
	res = w.WriteNow(context.Background(), &WriteJob{Hash: "ok1", Content: Content{Config: []byte("fine")}})
	if res.Gen == nil || liveConfig(t, s) != "fine" || s.Live() == nil || s.Live().Dir != res.Gen.Dir {
		t.Errorf("%+v", res)
	}
	// How long it took is said (the log's "took"): a stage with its fsyncs and a check.
	if res.Took <= 0 {
		t.Errorf("the write took %v", res.Took)
	}
}

// TestWriteNowTellsDone: a write made at once hands its outcome to done, as a background
// write does, whatever it is: the caller records every write in one place.
func TestWriteNowTellsDone(t *testing.T) {
	s := open(t, newEnv(t))
	var told []Written
	w := NewWriter(s, (&gatedCheck{}).check, isRejected, func(r Written) { told = append(told, r) }, time.Second)
	bad := w.WriteNow(context.Background(), &WriteJob{Hash: "bad1", Content: Content{Config: []byte("bad")}})
	good := w.WriteNow(context.Background(), &WriteJob{Hash: "ok1", Content: Content{Config: []byte("fine")}})
	if len(told) != 2 {
		t.Fatalf("done told of %d writes, want 2", len(told))
	}
	if told[0].Job.Hash != "bad1" || told[0].Rejected != bad.Rejected || bad.Rejected == nil {
		t.Errorf("the rejection told %+v, returned %+v", told[0], bad)
	}
	if told[1].Job.Hash != "ok1" || told[1].Gen != good.Gen || good.Gen == nil {
		t.Errorf("the write told %+v, returned %+v", told[1], good)
	}
}

// TestWriterExclusive: taking the Exclusive lock waits for the write under way: what is done
// under it sees the write finished.
func TestWriterExclusive(t *testing.T) {
	s := open(t, newEnv(t))
	gate := make(chan struct{})
	c := &gatedCheck{gate: gate, started: make(chan string, 1)}
	w := NewWriter(s, c.check, isRejected, func(Written) {}, time.Second)
	go w.WriteNow(context.Background(), &WriteJob{Hash: "h1", Content: Content{Config: []byte("one")}})
	<-c.started // the write is in its check
	saw := make(chan string)
	go func() {
		w.Exclusive().Lock()
		defer w.Exclusive().Unlock()
		saw <- liveConfig(t, s)
	}()
	close(gate)
	if got := <-saw; got != "one" {
		t.Errorf("Exclusive ran before the write ended (live %q)", got)
	}
}

// TestWriteState: state files are written whole, 0600, and read back.
func TestWriteState(t *testing.T) {
	s := open(t, newEnv(t))
	if err := s.WriteState("inputs.json", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteState("inputs.json", []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadState("inputs.json")
	if err != nil || string(b) != `{"a":2}` {
		t.Fatalf("%q, %v", b, err)
	}
	fi, err := os.Stat(s.StateDir() + "/inputs.json")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	for _, bad := range []string{"", "../x", "current", "gen-1-abc", ".hidden"} {
		if err := s.WriteState(bad, nil); err == nil {
			t.Errorf("state name %q accepted", bad)
		}
	}
}
