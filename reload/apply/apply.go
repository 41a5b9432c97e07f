// Package apply carries out the sync's decision (package decide): nothing, a change through
// HAProxy's runtime API with the files written behind it, a confirmed reload with rollback, a
// deferred reload, a standby, a hold, or taking runtime changes back. It receives what it
// applies: the rendering, and its generation staged and validated when the decision needs one
// (package candidate makes both). Each outcome is recorded as one event in what HAProxy runs
// (package live); what it found is told to the Reporter, the Health and the Metrics, and
// returned as a Result.
package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
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

// Health is told what became of the configuration (status.Health).
type Health interface {
	Applied()     // a good configuration is live
	Written()     // it is written; HAProxy loads it when it starts
	Standby()     // it is valid, not applied (not the leader)
	Failed(error) // nothing new could go live
}

// Metrics count what acting did (status.Metrics).
type Metrics interface {
	Rendered(result string)                                           // renders_total{result}
	Valid()                                                           // config_valid
	SyncFailed(stage string)                                          // sync_failures_total{stage}
	ReloadEnded(endpoint, result string)                              // reloads_total{endpoint,result}, not success
	ReloadSucceeded(endpoint string, took time.Duration, hash string) // endpoint "": counted by the reloader
	RuntimeApplied(hash string)                                       // a change live with no reload
	RuntimeUpdated(counts map[string]int)                             // runtime_api_updates_total{kind}
	RuntimeFellBack()                                                 // the runtime API failed: a reload instead
	LiveAgain(hash string)                                            // the live configuration after a revert
	ObserveLive(ctx context.Context, path string)                     // change_to_live_seconds{path}
}

// Config is what an Applier works with.
type Config struct {
	HAProxy  *live.Owner
	Writer   *generation.Writer
	Store    *generation.Store
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
	Metrics       Metrics
	Health        Health
	Recorder      Recorder // nil: none
	Report        Reporter
	// Changed asks for another sync.
	Changed func()
	// ValidateNext is called when haproxy -c rejected a rendering HAProxy already runs (the
	// runtime API made it live): the next sync validates what it renders and leaves out the
	// data at fault (candidate.Builder.ValidateNext). nil: nothing.
	ValidateNext func()
	Logger       *slog.Logger
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
	if cfg.ValidateNext == nil {
		cfg.ValidateNext = func() {}
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
	// RuntimeFailed is set, with no Outcome, when the runtime API could not make a DoRuntime
	// change: a reload is to make it instead (the caller validates the rendering first).
	RuntimeFailed bool
}

// Job is one decision to carry out, and the rendering it is about.
type Job struct {
	Decision decide.Decision
	// Bundle is the rendering; nil when none could be made (all that can be done then is
	// taking back what HAProxy runs: DoRevert).
	Bundle *render.Bundle
	// Gen is the rendering staged as a generation and validated (haproxy -c): always when
	// the decision needs it (decide.Action.NeedsValid), else nil when it was not validated
	// yet (the background writer validates it behind a runtime API change).
	Gen *generation.Generation
	// Info says what the rendering was made from, for the logs and Events.
	Info snapshot.Summary
	// Plan is the runtime API's plan for the rendering (Plan).
	Plan *runtimeapi.Plan
	// Reason is why the sync ran, for the logs and Events.
	Reason string
}

// Apply carries out a job.
func (a *Applier) Apply(ctx context.Context, j Job) Result {
	d := j.Decision
	if j.Bundle == nil {
		// No rendering: all that can be done is taking back what HAProxy runs.
		if d.Action == decide.DoRevert {
			return a.revert(ctx, j)
		}
		return Result{Outcome: Rejected, Err: errors.New(d.Why)}
	}
	hash := j.Bundle.Hash
	switch d.Action {
	case decide.DoNothing:
		return a.nothing(ctx, j)
	case decide.DoRuntime:
		return a.runtimeUpdate(ctx, j)
	case decide.DoDefer:
		return a.deferReload(ctx, j)
	case decide.DoStandby:
		a.prune()
		a.cfg.Health.Standby()
		a.cfg.Metrics.Valid()
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
	hash := j.Bundle.Hash
	a.cfg.Metrics.Rendered("unchanged")
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

// revert: haproxy -c rejected a rendering after the runtime API had made it live (the job's,
// or, without one, the one HAProxy runs): HAProxy is taken back to the last good rendering (if it
// runs the rejected one, or nothing known), and the job's rejection is reported.
func (a *Applier) revert(ctx context.Context, j Job) Result {
	hash := a.cfg.HAProxy.State().Runs
	if j.Bundle != nil {
		hash = j.Bundle.Hash
	}
	rejected := a.cfg.HAProxy.State().Rejected(hash)
	a.cfg.Writer.Drop()
	if runs := a.cfg.HAProxy.State().Runs; runs == hash || runs == "" {
		a.revertRuntime(ctx)
	}
	if j.Bundle == nil || rejected == nil {
		return Result{Outcome: Rejected, Err: rejected}
	}
	return a.cfg.Report.Rejection(ctx, rejected)
}

// applied finishes a change that went live: old generations pruned, Events, if HAProxy still
// runs it (a write finishing late never reports an older rendering over a newer one).
func (a *Applier) applied(info snapshot.Summary, hash, reason string) {
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
