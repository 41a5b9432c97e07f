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
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"

	"go.opentelemetry.io/otel/attribute"
)

// Recorder tells operators, on the object they edited, what became of their change
// (Kubernetes Events in the Kubernetes modes). Implementations must rate-limit themselves.
type Recorder interface {
	Event(ref snapshot.Ref, warning bool, reason, message string)
}

// Reporter tells what acting found that the sync reports: an operational failure at a stage
// (package failure; the error may name its own, a *failure.Error), retried with backoff, or
// bad input no held input stands for.
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
	// FindHAProxy returns the pid of a HAProxy running on the configuration when the reloader
	// cannot reach it (0: none seen); nil: not looked for.
	FindHAProxy func() int
	Metrics     Metrics
	Health      Health
	Recorder    Recorder // nil: none
	Report      Reporter
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

// runtimeUpdate makes a change live through the runtime API, at once, and has the rendering
// written as the live generation with no reload (at once when it was validated already, else
// by the background writer, which validates it first), so that a later reload loads the same.
// When the runtime API failed, the Result says RuntimeFailed: the caller reloads instead.
func (a *Applier) runtimeUpdate(ctx context.Context, j Job) Result {
	m := a.cfg.Metrics
	hash, plan := j.Bundle.Hash, j.Plan
	start := time.Now()
	// Until the rendering is live on disk, the record of what HAProxy runs would be wrong
	// half way: it says nothing (the write records it again).
	before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
	recorded := time.Now()
	rctx, span := tracing.Start(ctx, "runtime api", attribute.String("runtime.changes", plan.Summary()))
	model, err := a.cfg.Runtime.Apply(rctx, plan, before.Model)
	tracing.End(span, err)
	sent := time.Now()
	if err != nil {
		m.RuntimeFellBack()
		a.cfg.HAProxy.Record(live.RuntimeFailed{})
		if before.LoadsAtStart != "" {
			// Expected while HAProxy has not started: the reload path writes the files it
			// will load (and says so).
			a.log.InfoContext(ctx, "runtime API not reachable, HAProxy not started yet: writing the configuration instead", "error", err)
		} else {
			a.log.WarnContext(ctx, "runtime API update failed: reloading instead", "error", err)
		}
		return Result{RuntimeFailed: true}
	}
	load := ""
	if before.LoadsAtStart != "" {
		// HAProxy answered: it started on the files the sidecar wrote while it was down, and
		// now runs them with these changes. Learn its load now, or the probe would take it
		// for a start the sidecar knows nothing of and forget these changes.
		load = a.loadID(ctx)
	}
	// Counted before it is recorded live, as a reload is.
	m.Rendered("success")
	m.RuntimeUpdated(plan.Counts())
	m.RuntimeApplied(hash)
	a.cfg.Health.Applied() // HAProxy answered: it runs it (the files follow)
	a.cfg.HAProxy.Record(live.RuntimeApplied{Hash: hash, Model: model, Load: load, At: time.Now()})
	m.ObserveLive(ctx, live.PathRuntime)
	a.log.InfoContext(ctx, "configuration live without a reload", "reason", j.Reason, "hash", short(hash),
		"changes", plan.Summary(), "runtime_api", time.Since(start).Round(time.Microsecond),
		// Where that time went: the record of what HAProxy runs set aside (a file removed),
		// the commands, what followed.
		"record", recorded.Sub(start).Round(time.Microsecond), "commands", sent.Sub(recorded).Round(time.Microsecond))
	if res, failed := a.write(ctx, j); failed {
		return res
	}
	return Result{Outcome: Applied, Hash: hash}
}

// write makes the rendering HAProxy runs (through the runtime API) the live generation, with
// no reload: at once when it was validated already; else through the background writer, or,
// when none runs (Sync called on its own), here. failed is true with the result of a failure.
func (a *Applier) write(ctx context.Context, j Job) (res Result, failed bool) {
	job := &generation.WriteJob{Hash: j.Bundle.Hash, Content: j.Bundle.Content(),
		Payload: written{bundle: j.Bundle, info: j.Info, reason: j.Reason}}
	if j.Gen != nil {
		if err := a.cfg.Writer.Activate(j.Gen); err != nil {
			return a.cfg.Report.Failure(ctx, failure.Activate, err), true
		}
		a.Written(generation.Written{Job: job, Gen: j.Gen})
		return Result{}, false
	}
	if a.cfg.Writer.Queue(job) {
		return Result{}, false
	}
	// The outcome is recorded as the background writer's is, through Written (the writer's
	// done): a rejection makes the next sync search for the data at fault, a failure is
	// reported once and tried again.
	w := a.cfg.Writer.WriteNow(ctx, job)
	switch {
	case w.Rejected != nil:
		// This sync also takes the runtime changes back and reports it.
		a.revertRuntime(ctx)
		return a.cfg.Report.Rejection(ctx, w.Rejected), true
	case w.Err != nil:
		return Result{Outcome: Failed, Err: w.Err, Retry: true}, true
	}
	return Result{}, false
}

// written is what a write needs to report.
type written struct {
	bundle *render.Bundle
	info   snapshot.Summary
	reason string
}

// Written records a write of the background writer, or one made at once (it is the writer's
// done either way): on success the rendering is the last good one and is reported live; a
// rejection or failure makes the next sync deal with it.
func (a *Applier) Written(w generation.Written) {
	pl := w.Job.Payload.(written)
	switch {
	case w.Superseded:
		// A newer rendering is being written.
	case w.Rejected != nil:
		// The next sync validates, takes the runtime changes back or past the data at
		// fault, and reports the rejection.
		a.cfg.HAProxy.Record(live.CheckRefused{Hash: w.Job.Hash, Err: w.Rejected})
		a.cfg.ValidateNext()
		a.cfg.Changed()
	case w.Err != nil:
		if errors.Is(w.Err, context.Canceled) {
			return
		}
		// Disk trouble (full, read-only): HAProxy runs the change already; the next sync
		// tries the write again, after a pause (files_behind says they are behind). The
		// same trouble is reported once.
		if msg := w.Err.Error(); a.lastWriteErr.Swap(msg) != msg {
			// The background writer's: no sync's context.
			a.cfg.Report.Failure(context.Background(), failure.Write, w.Err)
		}
		time.AfterFunc(time.Second, a.cfg.Changed)
	default:
		a.lastWriteErr.Store("")
		_, after := a.cfg.HAProxy.Record(live.FilesWritten{Bundle: pl.bundle, Gen: w.Gen, At: time.Now()})
		if after.Runs != pl.bundle.Hash {
			// A newer change went live meanwhile: its own write reports it.
			return
		}
		a.applied(pl.info, pl.bundle.Hash, pl.reason)
		a.log.Debug("generation written and validated", "hash", short(pl.bundle.Hash), "waited", w.Waited.Round(time.Millisecond), "took", w.Took.Round(time.Millisecond))
	}
}

// revertRuntime brings HAProxy back to the last good rendering, through the runtime API when
// it can, else by reloading the live files (the last good generation).
func (a *Applier) revertRuntime(ctx context.Context) {
	s := a.cfg.HAProxy.State()
	good := s.Good.Bundle
	var plan *runtimeapi.Plan
	if good != nil {
		plan = a.cfg.Runtime.Plan(s.Model, good.Config, good.Certificates, good.Maps)
		if plan.Reload() == "" {
			before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
			m, err := a.cfg.Runtime.Apply(ctx, plan, before.Model)
			if err == nil {
				a.reportLive(good.Hash)
				a.cfg.HAProxy.Record(live.RevertedAtRuntime{Model: m, At: time.Now()})
				a.log.WarnContext(ctx, "runtime API changes that did not validate were taken back", "changes", plan.Summary())
				return
			}
			a.log.ErrorContext(ctx, "taking back runtime API changes that did not validate failed: reloading the last good configuration", "error", err)
		}
	}
	a.cfg.HAProxy.Record(live.RuntimeFailed{})
	if err := a.reloadHAProxy(ctx); err != nil {
		a.log.ErrorContext(ctx, "reload of the last good configuration", "error", err)
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		return
	}
	if good == nil {
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		return
	}
	a.reportLive(good.Hash)
	a.reloaded(ctx, good, s.Good.Gen, plan)
}

// reloaded records that HAProxy was reloaded with bundle's files (gen): the load it runs now,
// and the runtime API's model of it (plan's, told HAProxy's version).
func (a *Applier) reloaded(ctx context.Context, bundle *render.Bundle, gen *generation.Generation, plan *runtimeapi.Plan) {
	load := a.loadID(ctx)
	model := a.cfg.Runtime.Learn(ctx, plan.Loaded())
	a.cfg.HAProxy.Record(live.Reloaded{Bundle: bundle, Gen: gen, Load: load, Model: model, At: time.Now()})
}

// reportLive reports the rendering hash live again after a revert: the rejected one was
// reported live when the runtime API made it so (the caller then reports the rejection).
// Called before the revert is recorded, as a change is counted before it is: whoever sees
// it live in /readyz sees it in the metrics.
func (a *Applier) reportLive(hash string) {
	a.cfg.Metrics.LiveAgain(hash)
	a.cfg.Health.Applied()
}

// reload makes the candidate live through a reload: the files swapped atomically, HAProxy
// reloaded, the reload confirmed; a refused reload, or a canary that failed, rolls the files
// back (the caller blames the changed inputs: Result.Refused).
func (a *Applier) reload(ctx context.Context, j Job, why string) Result {
	m := a.cfg.Metrics
	hash := j.Bundle.Hash
	a.cfg.Writer.Drop() // a rendering waiting to be written is older than this one
	m.Rendered("success")
	a.log.InfoContext(ctx, "reloading HAProxy", "why", why, "hash", short(hash))
	if err := a.cfg.Writer.Activate(j.Gen); err != nil {
		return a.cfg.Report.Failure(ctx, failure.Activate, fmt.Errorf("activate generation: %w", err))
	}
	start := time.Now()
	rctx, span := tracing.Start(ctx, "reload", attribute.String("reload.endpoint", a.cfg.Endpoint), attribute.String("reload.why", why))
	err := a.reloadHAProxy(rctx)
	tracing.End(span, err)
	took := time.Since(start)
	var failed *reload.Failed
	var canary *rollout.Refused
	switch {
	case err == nil:
		// Counted before it is recorded live: whoever sees it live in /readyz sees it counted.
		m.ReloadSucceeded(a.countedEndpoint(), took, hash)
		a.cfg.Health.Applied()
		a.reloaded(ctx, j.Bundle, j.Gen, j.Plan)
		if !a.cfg.ReloaderCounts {
			m.ObserveLive(ctx, live.PathReload) // else per host, by the reloader
		}
		a.applied(j.Info, hash, j.Reason)
		a.log.InfoContext(ctx, "configuration live", "reason", j.Reason, "hash", short(hash),
			"revision", j.Info.Revision, "services", j.Info.Services, "certificates", j.Info.Certificates, "reload", took.Round(time.Millisecond))
		return Result{Outcome: Applied, Hash: hash, Reloaded: true}
	case errors.Is(err, reload.ErrNotRunning):
		return a.writtenWhileDown(j, err)
	case errors.Is(err, reload.ErrRenderAgain):
		a.cfg.HAProxy.Record(live.RenderAgain{At: time.Now()})
		a.rollback()
		a.log.InfoContext(ctx, "rendering again before anything goes live", "reason", err)
		a.cfg.Changed()
		return Result{Outcome: Rejected, Hash: hash, Err: err}
	case errors.As(err, &canary):
		// Blamed as a refused reload is: the canary runs the last good configuration again,
		// the other hosts never left it.
		a.cfg.HAProxy.Record(live.ReloadRefused{Hash: hash, At: time.Now()})
		a.rollback()
		rerr := &snapshot.InputError{Stage: snapshot.StageCanary, Ref: j.Info.TemplateRef, Err: err}
		return Result{Outcome: Rejected, Hash: hash, Err: rerr, Refused: true}
	case errors.As(err, &failed):
		if out := j.Bundle.Secret.Withhold(failed.Output); out != failed.Output {
			err = &reload.Failed{Output: out} // HAProxy's words about a line holding a secret
		}
		a.cfg.HAProxy.Record(live.ReloadRefused{Hash: hash, At: time.Now()})
		a.rollback()
		if !a.cfg.ReloaderCounts {
			m.ReloadEnded(a.cfg.Endpoint, "failed")
		}
		rerr := &snapshot.InputError{Stage: snapshot.StageReload, Ref: j.Info.TemplateRef,
			Err: fmt.Errorf("HAProxy refused the new configuration at reload (the previous one keeps serving): %w", err)}
		return Result{Outcome: Rejected, Hash: hash, Err: rerr, Refused: true}
	default:
		a.cfg.HAProxy.Record(live.ReloadUnknown{At: time.Now()})
		if !a.cfg.ReloaderCounts {
			m.ReloadEnded(a.cfg.Endpoint, "error")
		}
		return a.cfg.Report.Failure(ctx, failure.Reload, fmt.Errorf("reload: %w", err))
	}
}

// writtenWhileDown: the files are in place but HAProxy does not run (err): it loads them when
// it starts; when it should run, not reaching it is a fault (a wrong --master-socket, HAProxy
// down), not a start-up race.
func (a *Applier) writtenWhileDown(j Job, err error) Result {
	hash := j.Bundle.Hash
	ev := live.WrittenWhileDown{Bundle: j.Bundle, Gen: j.Gen, Model: j.Plan.Loaded()}
	if a.cfg.ExpectRunning {
		ev.Unreachable = err.Error()
		if a.cfg.FindHAProxy != nil {
			ev.Process = a.cfg.FindHAProxy()
		}
	}
	a.cfg.HAProxy.Record(ev)
	a.prune()
	a.cfg.Health.Written()
	if a.cfg.ExpectRunning {
		a.cfg.Metrics.SyncFailed(failure.Reload)
		if ev.Process != 0 {
			a.log.Error("HAProxy runs but its master socket does not answer (check --master-socket): the configuration is written and not loaded", "pid", ev.Process, "hash", short(hash), "error", err)
		} else {
			a.log.Error("HAProxy cannot be reached: the configuration is written and not loaded", "hash", short(hash), "error", err)
		}
		return Result{Outcome: Failed, Hash: hash, Err: err, Retry: true}
	}
	a.log.Info("configuration written; HAProxy is not running yet and will load it at start",
		"reason", j.Reason, "hash", short(hash), "error", err)
	return Result{Outcome: Written, Hash: hash}
}

// reloadHAProxy asks for a reload; the probe does not take the master's silence meanwhile
// for HAProxy being down. The caller records the outcome, which ends the reload.
func (a *Applier) reloadHAProxy(ctx context.Context) error {
	a.cfg.HAProxy.Record(live.ReloadStarted{})
	return a.cfg.Reloader.Reload(ctx)
}

// loadIdentifier is a reloader that can tell which load of HAProxy runs now (see
// reload.MasterSocket.LoadID).
type loadIdentifier interface {
	LoadID(ctx context.Context) (string, error)
}

// loadID is the HAProxy load that runs now, when the reloader can tell ("" otherwise).
func (a *Applier) loadID(ctx context.Context) string {
	li, ok := a.cfg.Reloader.(loadIdentifier)
	if !ok {
		return ""
	}
	id, err := li.LoadID(ctx)
	if err != nil {
		a.log.DebugContext(ctx, "cannot tell which load of HAProxy runs the new configuration", "error", err)
		return ""
	}
	return id
}

// rollback makes the last good generation live again (a reload refused the new one).
func (a *Applier) rollback() {
	if err := a.cfg.Writer.Rollback(a.cfg.HAProxy.State().Good.Gen); err != nil {
		a.log.Error("rollback to the last good generation failed", "error", err)
	}
}

// deferReload holds a reload asked within MinReloadInterval of the previous one: the changes
// the runtime API can make are made now, and the reload happens when the interval is over,
// with whatever the inputs are then (latest wins).
func (a *Applier) deferReload(ctx context.Context, j Job) Result {
	plan, d := j.Plan, j.Decision
	if plan.Changes() > 0 {
		// HAProxy will run no rendering until the reload: the old one with some of the new
		// servers.
		before, _ := a.cfg.HAProxy.Record(live.RuntimeChanging{})
		if m, err := a.cfg.Runtime.Apply(ctx, plan, before.Model); err != nil {
			a.cfg.HAProxy.Record(live.RuntimeFailed{})
			a.log.DebugContext(ctx, "runtime API update while a reload waits failed; the reload will load it", "error", err)
		} else {
			a.cfg.HAProxy.Record(live.RuntimeWhileWaiting{Model: m})
			a.cfg.Metrics.RuntimeUpdated(plan.Counts())
			a.log.InfoContext(ctx, "made at runtime while the reload waits", "changes", plan.Summary())
		}
	}
	a.cfg.HAProxy.Record(live.ReloadDeferred{At: d.At})
	a.prune()
	wait := time.Until(d.At)
	a.log.InfoContext(ctx, "reload deferred (--min-reload-interval)", "why", d.Why, "in", wait.Round(time.Millisecond), "hash", short(j.Bundle.Hash))
	return Result{Outcome: Deferred, Hash: j.Bundle.Hash, ReloadIn: wait}
}

// countedEndpoint is the endpoint label reloads are counted under ("" when the reloader
// counts them).
func (a *Applier) countedEndpoint() string {
	if a.cfg.ReloaderCounts {
		return ""
	}
	return a.cfg.Endpoint
}
