// Package apply carries out the sync's decision (package decide): nothing, a change through
// HAProxy's runtime API with the files written behind it, a validated and confirmed reload
// with rollback, a deferred reload, a standby, a hold, or taking runtime changes back. Each
// outcome is recorded as one event in what HAProxy runs (package live); what it found is told
// to the Reporter and returned as a Result.
package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// Recorder tells operators, on the object they edited, what became of their change
// (Kubernetes Events in the Kubernetes modes). Implementations must rate-limit themselves.
type Recorder interface {
	Event(ref snapshot.Ref, warning bool, reason, message string)
}

// Reporter tells what acting found that the sync reports: an operational failure (retried
// with backoff), or bad input no held input stands for.
type Reporter interface {
	Failure(ctx context.Context, stage string, err error) Result
	Rejection(ctx context.Context, err error) Result
}

// Config is what an Applier works with.
type Config struct {
	HAProxy  *live.Owner
	Writer   *generation.Writer
	Store    *generation.Store
	Build    *candidate.Builder
	Reloader reload.Reloader
	// Runtime makes the changes it can through HAProxy's runtime API; nil: every change
	// reloads.
	Runtime Runtime
	// Endpoint names the reload target in metrics and logs; ReloaderCounts says the reloader
	// counts reloads_total per endpoint itself (the Data Plane API, one count per host).
	Endpoint       string
	ReloaderCounts bool
	// ExpectRunning says HAProxy is expected to run from the start: not reaching it is an
	// error, not "not running yet".
	ExpectRunning bool
	Metrics       *status.Metrics
	Health        *status.Health
	Recorder      Recorder // nil: none
	Report        Reporter
	// Changed asks for another sync.
	Changed func()
	Logger  *slog.Logger
}

// Applier carries out decisions.
type Applier struct {
	cfg Config
	log *slog.Logger
	// lastWriteErr is the trouble the last failed write of a runtime change met ("" none).
	lastWriteErr atomic.Value
}

// New returns an Applier.
func New(cfg Config) *Applier {
	if cfg.Runtime == nil {
		cfg.Runtime = reloadsOnly{}
	}
	a := &Applier{cfg: cfg, log: cfg.Logger}
	a.lastWriteErr.Store("")
	return a
}

// Outcome says how one sync ended.
type Outcome int

const (
	// Applied: a new rendering went live (reload or runtime API).
	Applied Outcome = iota + 1
	// Unchanged: HAProxy runs the rendering already.
	Unchanged
	// Rejected: nothing new could go live; the reason is reported. It waits for a change.
	Rejected
	// Failed: an operational failure (disk, HAProxy unreachable); retried with backoff.
	Failed
	// Deferred: a reload waits for --min-reload-interval.
	Deferred
	// StandingBy: validated, not applied (not the leader).
	StandingBy
	// Written: the files are in place, HAProxy does not run; it loads them when it starts.
	Written
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Unchanged:
		return "unchanged"
	case Rejected:
		return "rejected"
	case Failed:
		return "error"
	case Deferred:
		return "deferred"
	case StandingBy:
		return "standby"
	case Written:
		return "written"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result says what one sync did.
type Result struct {
	Outcome Outcome
	// Action is what the sync decided.
	Action decide.Action
	Hash   string
	Err    error
	// Held is how many inputs are held back after this sync.
	Held int
	// Retry is set when the failure was operational and worth retrying without a new change.
	Retry bool
	// Reloaded is set when the change went live through a reload (not the runtime API).
	Reloaded bool
	// ReloadIn is, with Outcome Deferred, when the deferred reload is due.
	ReloadIn time.Duration
	// Refused is set when HAProxy refused the rendering at a reload: the inputs that changed
	// since the last good rendering are to blame.
	Refused bool
}

// Job is one decision to carry out.
type Job struct {
	Decision  decide.Decision
	Candidate *candidate.Candidate
	// Plan is the runtime API's plan for the rendering (Plan).
	Plan *runtimeapi.Plan
	// Reason is why the sync ran, for the logs and Events.
	Reason string
}

// Apply carries out a job.
func (a *Applier) Apply(ctx context.Context, j Job) Result {
	c, d := j.Candidate, j.Decision
	if c == nil {
		// No rendering: all that can be done is taking back what HAProxy runs.
		if d.Action == decide.DoRevert {
			return a.revert(ctx, j)
		}
		return Result{Outcome: Rejected, Err: errors.New(d.Why)}
	}
	hash := c.Bundle.Hash
	switch d.Action {
	case decide.DoNothing:
		return a.nothing(ctx, j)
	case decide.DoRuntime:
		if res, ok := a.runtimeUpdate(ctx, j); ok {
			return res
		}
		return a.reload(ctx, j, "the runtime API update failed")
	case decide.DoDefer:
		return a.deferReload(ctx, j)
	case decide.DoStandby:
		if res, ok := a.validated(ctx, c); !ok {
			return res
		}
		a.prune()
		a.cfg.Health.Standby()
		a.cfg.Metrics.ConfigValid.Set(1)
		a.log.InfoContext(ctx, "standby: configuration rendered and valid, not applied (not the leader)", "reason", j.Reason, "hash", short(hash))
		return Result{Outcome: StandingBy, Hash: hash}
	case decide.DoHold:
		err := errors.New(d.Why)
		a.log.WarnContext(ctx, "configuration not applied", "why", d.Why, "hash", short(hash))
		a.cfg.Health.Failed(err)
		return Result{Outcome: Rejected, Hash: hash, Err: err}
	case decide.DoRevert:
		return a.revert(ctx, j)
	}
	return a.reload(ctx, j, d.Why)
}

// nothing: HAProxy runs this rendering. The files are made to say so if the writer could not.
func (a *Applier) nothing(ctx context.Context, j Job) Result {
	hash := j.Candidate.Bundle.Hash
	a.cfg.Metrics.Renders.WithLabelValues("unchanged").Inc()
	if live := a.cfg.Store.Live(); (live == nil || live.Hash != hash) && !a.cfg.Writer.Pending(hash) {
		// HAProxy got it through the runtime API and the write failed: write it again.
		if res, failed := a.write(ctx, j); failed {
			return res
		}
	}
	if a.cfg.HAProxy.State().Runs == hash {
		a.cfg.Health.Applied() // still live; clears an error the operator has since fixed
	}
	a.log.DebugContext(ctx, "render unchanged, nothing to do", "reason", j.Reason, "hash", short(hash))
	return Result{Outcome: Unchanged, Hash: hash}
}

// validated makes sure c is staged and validated: ok false with the result to return when it
// is not valid or cannot be staged.
func (a *Applier) validated(ctx context.Context, c *candidate.Candidate) (Result, bool) {
	err := a.cfg.Build.Validated(ctx, c)
	switch {
	case err == nil:
		return Result{}, true
	case candidate.IsRejected(err):
		// Nothing an operator edits changed, yet the rendering does not validate: data from
		// the cluster (a pod, an annotation) makes the template produce a bad configuration.
		// The next sync, at once, validates what it renders and leaves out what is at fault;
		// it reports what it cannot leave out (nobody is blamed before it looked).
		a.cfg.Build.ValidateNext()
		a.cfg.Changed()
		a.log.InfoContext(ctx, "the rendering does not validate: looking for the data at fault", "hash", short(c.Bundle.Hash), "error", err)
		return Result{Outcome: Rejected, Hash: c.Bundle.Hash, Err: err}, false
	}
	return a.cfg.Report.Failure(ctx, candidate.FailureStage(err, status.FailStage), err), false
}

// revert: haproxy -c rejected a rendering after the runtime API had made it live (the job's,
// or, without one, the one HAProxy runs): HAProxy is taken back to the last good rendering (if it
// runs the rejected one, or nothing known), and the job's rejection is reported.
func (a *Applier) revert(ctx context.Context, j Job) Result {
	hash := a.cfg.HAProxy.State().Runs
	if j.Candidate != nil {
		hash = j.Candidate.Bundle.Hash
	}
	rejected := a.cfg.Writer.Rejected(hash)
	a.cfg.Writer.Drop()
	if runs := a.cfg.HAProxy.State().Runs; runs == hash || runs == "" {
		a.revertRuntime(ctx)
	}
	if j.Candidate == nil || rejected == nil {
		return Result{Outcome: Rejected, Err: rejected}
	}
	return a.cfg.Report.Rejection(ctx, rejected)
}

// applied finishes a change that went live: old generations pruned, Events, if HAProxy still
// runs it (a write finishing late never reports an older rendering over a newer one).
func (a *Applier) applied(info candidate.Info, hash, reason string) {
	a.prune()
	if a.cfg.HAProxy.State().Runs != hash {
		return
	}
	a.cfg.Health.Applied()
	if a.cfg.Recorder == nil {
		return
	}
	msg := fmt.Sprintf("configuration %s is live (%s)", short(hash), reason)
	for _, ref := range []snapshot.Ref{info.TemplateRef, info.ServicesRef} {
		if ref != (snapshot.Ref{}) {
			ref.Key = ""
			a.cfg.Recorder.Event(ref, false, "Applied", msg)
		}
	}
}

// prune deletes the generations nothing needs any more (the live, the last good and the newest
// staged ones stay).
func (a *Applier) prune() {
	if err := a.cfg.Writer.Prune(a.cfg.HAProxy.State().Good.Gen); err != nil {
		a.log.Warn("prune old generations", "error", err)
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
