package rollout

import "fmt"

// Refused is the error of a rollout its canary stopped: the canary host is given the last good
// configuration again (RolledBack says whether that is done, or left to retries), and no other
// host was given the new one.
type Refused struct {
	// Canary names the canary host (its URL without credentials).
	Canary    string
	Judgement Judgement
	// RolledBack is set once the canary runs the last good configuration again.
	RolledBack bool
}

func (r *Refused) Error() string {
	back := "it is back on the last good configuration"
	if !r.RolledBack {
		back = "it is being returned to the last good configuration"
	}
	what := "failed"
	if r.Judgement.Verdict == Inconclusive {
		what = "was inconclusive (--canary-inconclusive=rollback)"
	}
	return fmt.Sprintf("the canary host %s %s: %s; %s, and the other hosts never had the new one", r.Canary, what, r.Judgement.Reason, back)
}
