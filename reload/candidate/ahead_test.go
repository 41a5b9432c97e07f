package candidate

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
)

// TestMakeAheadTakesThePlainWayAlone: a rendering is made ahead of its sync only where Make
// would render without validating first, and is then what Make makes; anywhere else it is
// not made, and nothing the sync relies on changes (ValidateNext stays asked for).
func TestMakeAheadTakesThePlainWayAlone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		checkAfter bool
		tried      bool // template sets tried apart
		validate   bool // ValidateNext was called
		next       *snapshot.Objects
		ok         bool
		unchecked  bool
	}{
		{name: "nothing an operator edits changed", next: objects("v1", "web"), ok: true},
		{name: "a service added, validated first", next: objects("v1", "web", "api")},
		{name: "a service added, checked after it goes live", checkAfter: true, next: objects("v1", "web", "api"), ok: true, unchecked: true},
		{name: "the template set changed, checked after", checkAfter: true, next: objects("v2", "web")},
		{name: "the template set changed, tried apart", checkAfter: true, tried: true, next: objects("v2", "web")},
		{name: "ValidateNext asked", checkAfter: true, validate: true, next: objects("v1", "web")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), filepath.Join(dir, "state"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Inputs: snapshot.Builder{}, Renderer: &slowRenderer{}, Store: store, CheckAfter: tc.checkAfter}
			if tc.tried {
				cfg.Tried = func(string, time.Duration, error) {}
			}
			b := New(cfg)
			t.Cleanup(b.StopTrial)
			var q quarantine.State
			oneSync(t, b, &q, objects("v1", "web"))
			if tc.validate {
				b.ValidateNext()
			}
			cur := b.Decode(tc.next)
			ahead, ok := b.MakeAhead(context.Background(), tc.next, cur, &q)
			if ok != tc.ok {
				t.Fatalf("made ahead: %v, want %v", ok, tc.ok)
			}
			if b.WillValidate() != tc.validate {
				t.Errorf("ValidateNext asked after MakeAhead: %v, want %v", b.WillValidate(), tc.validate)
			}
			if !ok {
				return
			}
			m := b.Make(context.Background(), tc.next, cur, &q, nil, false)
			if m.Err != nil {
				t.Fatal(m.Err)
			}
			if config(ahead) != config(m) || ahead.Candidate.Bundle.Hash != m.Candidate.Bundle.Hash {
				t.Errorf("made ahead %q, Make %q", config(ahead), config(m))
			}
			if ahead.Candidate.Unchecked != tc.unchecked || m.Candidate.Unchecked != tc.unchecked {
				t.Errorf("unchecked: ahead %v, Make %v, want %v", ahead.Candidate.Unchecked, m.Candidate.Unchecked, tc.unchecked)
			}
			if len(ahead.Held) != 0 || len(ahead.Selection.Changed) != len(m.Selection.Changed) {
				t.Errorf("held %v, changed %v (Make: %v)", ahead.Held, ahead.Selection.Changed, m.Selection.Changed)
			}
		})
	}
}
