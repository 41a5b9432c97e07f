package quarantine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// world is a fake rendering: it fails when a bad change is in, or when all the changes of a
// bad pair are in together.
type world struct {
	changed []string
	bad     map[string]bool
	pairs   [][2]string
	baseBad bool
	tries   int
	opErrAt int // the nth try fails operationally (0: never)
}

func (w *world) try(revert map[string]bool) (string, error) {
	w.tries++
	if w.opErrAt == w.tries {
		return "", errors.New("disk full")
	}
	in := map[string]bool{}
	for _, id := range w.changed {
		if !revert[id] {
			in[id] = true
		}
	}
	fail := func(why string) (string, error) {
		return "", &snapshot.InputError{Stage: snapshot.StageValidate, Err: errors.New(why)}
	}
	if w.baseBad {
		return fail("broken without any change")
	}
	for id := range in {
		if w.bad[id] {
			return fail(id + " is bad")
		}
	}
	for _, p := range w.pairs {
		if in[p[0]] && in[p[1]] {
			return fail(p[0] + "+" + p[1])
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(in)), ","), nil
}

func ids(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("service/s%02d", i))
	}
	return out
}

func TestSearch(t *testing.T) {
	tests := []struct {
		name         string
		w            world
		trials       int
		blame        func(error) string
		wantCulprits string
		wantResult   string // what the returned attempt had in
		wantErr      string
		maxTries     int
	}{
		{name: "nothing bad: one try", w: world{changed: ids(3)}, wantResult: "service/s00,service/s01,service/s02", maxTries: 1},
		{name: "the one change is bad", w: world{changed: ids(1), bad: map[string]bool{"service/s00": true}}, wantCulprits: "service/s00", maxTries: 2},
		{name: "one bad among eight", w: world{changed: ids(8), bad: map[string]bool{"service/s05": true}},
			wantCulprits: "service/s05", wantResult: "service/s00,service/s01,service/s02,service/s03,service/s04,service/s06,service/s07", maxTries: 8},
		{name: "two bad among eight", w: world{changed: ids(8), bad: map[string]bool{"service/s01": true, "service/s06": true}},
			wantCulprits: "service/s01 service/s06", wantResult: "service/s00,service/s02,service/s03,service/s04,service/s05,service/s07", maxTries: 10},
		{name: "a pair bad only together: the later one is held", w: world{changed: ids(4), pairs: [][2]string{{"service/s00", "service/s03"}}},
			wantCulprits: "service/s03", wantResult: "service/s00,service/s01,service/s02"},
		{name: "broken without the changes: not theirs to carry", w: world{changed: ids(2), baseBad: true}, wantErr: "broken without any change", maxTries: 2},
		{name: "an operational failure stops the search", w: world{changed: ids(2), bad: map[string]bool{"service/s00": true}, opErrAt: 2}, wantErr: "disk full", maxTries: 2},
		{name: "a precise blame needs no bisection", w: world{changed: ids(8), bad: map[string]bool{"service/s05": true}},
			blame: func(err error) string {
				if strings.Contains(err.Error(), "s05") {
					return "service/s05"
				}
				return ""
			},
			wantCulprits: "service/s05", wantResult: "service/s00,service/s01,service/s02,service/s03,service/s04,service/s06,service/s07", maxTries: 2},
		{name: "out of trials: the rest is held, what passed goes live", w: world{changed: ids(16), bad: map[string]bool{"service/s03": true, "service/s12": true}}, trials: 5,
			wantCulprits: strings.Join(ids(16)[2:], " "), wantResult: "service/s00,service/s01", maxTries: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trials := tt.trials
			if trials == 0 {
				trials = DefaultTrials
			}
			w := tt.w
			res, culprits, err := Search(w.changed, w.try, tt.blame, trials)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(slices.Sorted(maps.Keys(culprits)), " "); got != tt.wantCulprits {
				t.Errorf("culprits %q, want %q", got, tt.wantCulprits)
			}
			if tt.wantErr == "" && res != tt.wantResult {
				t.Errorf("result had %q, want %q", res, tt.wantResult)
			}
			if tt.maxTries > 0 && w.tries > tt.maxTries {
				t.Errorf("%d tries, want at most %d", w.tries, tt.maxTries)
			}
			if w.tries > trials {
				t.Errorf("%d tries over the budget of %d", w.tries, trials)
			}
			for id, why := range culprits {
				if why == nil {
					t.Errorf("%s held with no reason", id)
				}
			}
		})
	}
}

// TestSearchNotTheChanges: when the rendering fails with every change reverted too, the fault is
// not the changes', and the failure given is the one of everything as it is (a template's test
// failing), not the one of the reverted rendering (a backend no service makes any more).
func TestSearchNotTheChanges(t *testing.T) {
	try := func(revert map[string]bool) (string, error) {
		if len(revert) > 0 {
			return "", &snapshot.InputError{Stage: snapshot.StageValidate, Err: errors.New("unable to find required default_backend")}
		}
		return "", &snapshot.InputError{Stage: snapshot.StageTest, Err: errors.New("test routes: expect[0]: haproxy.cfg does not contain \"backend be_shop\"")}
	}
	_, culprits, err := Search(ids(2), try, nil, DefaultTrials)
	if err == nil || !strings.Contains(err.Error(), "test routes") || len(culprits) > 0 {
		t.Fatalf("err %v, culprits %v: want the test's failure and no culprit", err, culprits)
	}
}

// TestSearchReasons: a culprit found alone carries the failure seen with it in.
func TestSearchReasons(t *testing.T) {
	w := world{changed: ids(4), bad: map[string]bool{"service/s02": true}}
	_, culprits, err := Search(w.changed, w.try, nil, DefaultTrials)
	if err != nil {
		t.Fatal(err)
	}
	if got := culprits["service/s02"]; got == nil || !strings.Contains(got.Error(), "s02 is bad") {
		t.Errorf("reason %v", got)
	}
}
