package config

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Rollout is how a new configuration reaches the Data Plane API hosts (--reload=dataplane):
// every host at once, or a canary first, watched through HAProxy's own counters
// (docs/dataplane.md, "Canary rollout").
type Rollout struct {
	Mode              string // parallel or canary
	Window            time.Duration
	Max5xxRatio       float64
	MaxConnErrorRatio float64
	MaxFailedChecks   int
	MinRequests       int
	Inconclusive      string // promote or rollback
}

func (*Rollout) title() string { return "Rollout to the remote hosts (--reload=dataplane)" }

func (r *Rollout) register(fs *flag.FlagSet) {
	choiceVar(fs, &r.Mode, "rollout", "parallel", []string{"parallel", "canary"}, "with --reload=dataplane: parallel (every host at once) or canary (one host first, watched for --canary-window through HAProxy's counters; the other hosts follow if it holds, and if not it is rolled back and the change held)")
	fs.DurationVar(&r.Window, "canary-window", 30*time.Second, "with --rollout=canary: how long the canary host is watched before the other hosts follow (a threshold that trips rolls it back at once)")
	fs.Float64Var(&r.Max5xxRatio, "canary-max-5xx-ratio", 0.05, "with --rollout=canary: how much higher a frontend's or backend's share of 5xx responses may be on the canary than on the other hosts (0.05: five points; 1: off)")
	fs.Float64Var(&r.MaxConnErrorRatio, "canary-max-conn-error-ratio", 0.05, "with --rollout=canary: how much higher a backend's share of failed connections to its servers (econ) may be on the canary than on the other hosts (1: off)")
	fs.IntVar(&r.MaxFailedChecks, "canary-max-failed-checks", 0, "with --rollout=canary: how many servers may fail their health checks on the canary while they pass on the other hosts")
	fs.IntVar(&r.MinRequests, "canary-min-requests", 100, "with --rollout=canary: the requests (connections, for econ) a frontend or backend needs in the window before its shares count; a canary whose frontends served fewer in all is inconclusive")
	choiceVar(fs, &r.Inconclusive, "canary-inconclusive", "promote", []string{"promote", "rollback"}, "with --rollout=canary: when the counters cannot tell (fewer than --canary-min-requests, the canary's HAProxy restarted, its statistics unreadable): promote (the other hosts follow) or rollback (held as a failed canary)")
}

func (r *Rollout) validate() error {
	var errs []error
	if r.Window <= 0 {
		errs = append(errs, fmt.Errorf("--canary-window %s: want more than 0", r.Window))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"canary-max-5xx-ratio", r.Max5xxRatio}, {"canary-max-conn-error-ratio", r.MaxConnErrorRatio}} {
		if f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("--%s %g: want a share from 0 to 1 (0.05: five points)", f.name, f.v))
		}
	}
	if r.MaxFailedChecks < 0 {
		errs = append(errs, fmt.Errorf("--canary-max-failed-checks %d: want 0 or more", r.MaxFailedChecks))
	}
	if r.MinRequests < 0 {
		errs = append(errs, fmt.Errorf("--canary-min-requests %d: want 0 or more", r.MinRequests))
	}
	return errors.Join(errs...)
}

// Canary says the rollout goes through a canary host.
func (r *Rollout) Canary() bool { return r.Mode == "canary" }
