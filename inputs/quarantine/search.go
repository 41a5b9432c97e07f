package quarantine

import (
	"errors"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// DefaultTrials bounds the renderings (and validations) one search may try.
const DefaultTrials = 10

// ErrNotIsolated is the reason given to changed inputs the search had no trials left to tell
// apart: they are held together with the culprits.
var ErrNotIsolated = errors.New("held with other changes that failed together: the search for the one at fault ran out of trials")

// Search finds which of the changed inputs make try fail. try renders (and validates) the
// chosen inputs with those in revert at their last good versions; it fails with a
// *snapshot.InputError when the inputs are at fault, any other error when the attempt itself
// failed (then Search stops and returns it).
//
// Search first tries everything; if that fails, it tries with every change reverted: if that
// fails too, the changes are not at fault and Search returns the first failure (everything as
// it is now: what is at fault fails there, where the rendering without the changes may fail
// for another reason, a backend no service makes any more). Otherwise it
// bisects the changes, keeping each group that passes, until every culprit is alone, within
// trials attempts (at least two); changes it cannot tell apart in time are culprits too, with
// ErrNotIsolated. blame, when not nil, may name the changed input an error points at (a value
// printed from a service entry): that input is reverted at once, without bisecting.
//
// It returns the result of the last attempt that passed, which had exactly the culprits
// reverted.
func Search[T any](changed []string, try func(revert map[string]bool) (T, error), blame func(error) string, trials int) (res T, culprits map[string]error, err error) {
	var zero T
	s := &search[T]{try: try, trials: max(trials, 2), culprits: map[string]error{}}

	// Everything, then with blamed inputs reverted one by one while the blame is precise.
	s.remaining = append([]string(nil), changed...)
	var firstErr error
	for {
		r, ferr, ok := s.attempt(s.revertOf(nil))
		if !ok {
			return zero, nil, ferr
		}
		if ferr == nil {
			return r, s.culprits, nil
		}
		firstErr = ferr
		id := ""
		if blame != nil {
			id = blame(ferr)
		}
		i := indexOf(s.remaining, id)
		if i < 0 || s.used >= s.trials-1 {
			break
		}
		s.culprits[id] = ferr
		s.remaining = append(s.remaining[:i], s.remaining[i+1:]...)
	}
	if len(s.remaining) == 0 {
		return zero, nil, firstErr
	}

	// Every change reverted: if that fails too, the changes are not at fault.
	base, berr, ok := s.attempt(s.revertOf(s.remaining))
	if !ok {
		return zero, nil, berr
	}
	if berr != nil {
		return zero, nil, firstErr
	}
	s.last = base
	s.bisect(s.remaining, firstErr)
	return s.last, s.culprits, nil
}

// search is the state of one Search.
type search[T any] struct {
	try    func(revert map[string]bool) (T, error)
	trials int
	used   int // attempts made
	// culprits are the changes found at fault (always reverted); remaining the changes
	// left to bisect, of which accepted pass (with the culprits reverted).
	culprits  map[string]error
	remaining []string
	accepted  []string
	last      T // the result of the last attempt that passed
}

// attempt tries with revert reverted; ok is false when the attempt itself failed (err is
// then not the inputs' fault).
func (s *search[T]) attempt(revert map[string]bool) (res T, err error, ok bool) {
	s.used++
	r, err := s.try(revert)
	var ie *snapshot.InputError
	if err != nil && !errors.As(err, &ie) {
		var zero T
		return zero, err, false
	}
	return r, err, true
}

// revertOf is the culprits and ids.
func (s *search[T]) revertOf(ids []string) map[string]bool {
	m := make(map[string]bool, len(s.culprits)+len(ids))
	for id := range s.culprits {
		m[id] = true
	}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// bisect finds the culprits among cands, given that the accepted changes pass; bad, when
// set, is how cands fail together with them (already tried).
func (s *search[T]) bisect(cands []string, bad error) {
	if len(cands) == 0 {
		return
	}
	if bad == nil {
		if s.used >= s.trials {
			for _, id := range cands {
				s.culprits[id] = ErrNotIsolated
			}
			return
		}
		r, err, ok := s.attempt(s.revertOf(without(s.remaining, append(append([]string(nil), s.accepted...), cands...))))
		switch {
		case !ok:
			// The attempt itself failed: hold these rather than let them through untried.
			for _, id := range cands {
				s.culprits[id] = err
			}
			return
		case err == nil:
			s.accepted = append(s.accepted, cands...)
			s.last = r
			return
		}
		bad = err
	}
	if len(cands) == 1 {
		s.culprits[cands[0]] = bad
		return
	}
	half := len(cands) / 2
	before := len(s.accepted)
	s.bisect(cands[:half], nil)
	if len(s.accepted) == before+half {
		// The first half passed: the second half is what failed.
		s.bisect(cands[half:], bad)
		return
	}
	s.bisect(cands[half:], nil)
}

func indexOf(ids []string, id string) int {
	if id == "" {
		return -1
	}
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// without returns the ids of all not in drop.
func without(all, drop []string) []string {
	d := make(map[string]bool, len(drop))
	for _, id := range drop {
		d[id] = true
	}
	var out []string
	for _, id := range all {
		if !d[id] {
			out = append(out, id)
		}
	}
	return out
}
