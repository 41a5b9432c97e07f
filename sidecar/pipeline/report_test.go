package pipeline

import (
	"fmt"
	"maps"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestSameVersions: the state file is written again only when an input or its version
// changed; the comparison allocates nothing (a fingerprint string of each map, twice per sync,
// allocated 7.8 MB at 10,000 services).
func TestSameVersions(t *testing.T) {
	a := map[string]snapshot.Input{}
	for i := range 1000 {
		in := snapshot.Input{Kind: snapshot.KindService, Name: fmt.Sprintf("svc-%04d", i), Hash: fmt.Sprintf("h%d", i)}
		a[in.ID()] = in
	}
	b := maps.Clone(a)
	if !sameVersions(a, b) || !sameVersions(nil, map[string]snapshot.Input{}) {
		t.Fatal("equal versions found different")
	}
	if n := testing.AllocsPerRun(10, func() { sameVersions(a, b) }); n != 0 {
		t.Errorf("sameVersions allocates %v times, want 0", n)
	}
	changed := maps.Clone(a)
	in := changed["service/svc-0500"]
	in.Hash = "other"
	changed["service/svc-0500"] = in
	renamed := maps.Clone(a)
	delete(renamed, "service/svc-0500")
	renamed["service/svc-0500b"] = in
	fewer := maps.Clone(a)
	delete(fewer, "service/svc-0999")
	for name, other := range map[string]map[string]snapshot.Input{"a version changed": changed, "an input renamed": renamed, "an input deleted": fewer} {
		if sameVersions(a, other) || sameVersions(other, a) {
			t.Errorf("%s: found the same", name)
		}
	}
}
