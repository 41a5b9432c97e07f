package config

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// Wait is how a burst of changes becomes one sync (--wait MIN:MAX, like consul-template's
// wait): render after Min without a change, but never later than Max after the first.
type Wait struct {
	Min, Max time.Duration
	// Ahead renders during the quiet period (--render-ahead): the sync after it uses that
	// rendering when nothing changed since it was read.
	Ahead bool
}

// The renderings ahead of a burst (--render-ahead; sidecar/pipeline/ahead.go says why these).
const (
	// AheadSettle is how long the changes pause before a rendering ahead starts (half of MIN
	// when that is shorter).
	AheadSettle = 5 * time.Millisecond
	// AheadTries bounds the renderings ahead of one burst.
	AheadTries = 3
)

func (*Wait) title() string { return "Pacing" }

func (w *Wait) register(fs *flag.FlagSet) {
	*w = Wait{Min: 200 * time.Millisecond, Max: 2 * time.Second, Ahead: true}
	fs.Var(w, "wait", "`MIN:MAX`: render after MIN without changes, but never later than MAX after the first")
	fs.BoolVar(&w.Ahead, "render-ahead", true, "read and render a change during the quiet period of --wait "+aheadWhen()+": when nothing else changes before MIN has passed, that rendering goes live, MIN after the change rather than MIN plus the render; otherwise it is discarded and the sync renders as without it")
}

// aheadWhen says when a rendering ahead starts, for the help and docs/flags.md.
func aheadWhen() string {
	return fmt.Sprintf("(%d ms after the last change, or half of MIN when shorter; at most %d times a burst)", AheadSettle.Milliseconds(), AheadTries)
}

func (w *Wait) validate() error { return nil }

func (w *Wait) String() string { return fmt.Sprintf("%s:%s", w.Min, w.Max) }

// Set reads MIN:MAX, or MIN (then MAX is 4 MIN).
func (w *Wait) Set(s string) error {
	lo, hi, found := strings.Cut(s, ":")
	min, err := time.ParseDuration(lo)
	if err != nil {
		return fmt.Errorf("wait MIN: %w", err)
	}
	max := 4 * min
	if found {
		if max, err = time.ParseDuration(hi); err != nil {
			return fmt.Errorf("wait MAX: %w", err)
		}
	}
	if min < 0 || max < min {
		return fmt.Errorf("wait %q: want 0 <= MIN <= MAX", s)
	}
	w.Min, w.Max = min, max
	return nil
}
