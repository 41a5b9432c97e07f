// Package pipeline runs the sidecar's one linear flow: source -> debounce -> inputs ->
// quarantine -> render -> validate -> decide -> act (runtime API, or atomic generation swap and
// confirmed reload, rollback on failure).
//
// Each sync reads the inputs, holds back the bad ones one by one (package quarantine: a bad
// services key, template set or certificate is held at its last good version while every other
// change, pods above all, goes live), renders, then makes one decision from plain values
// (Decide: nothing, runtime change, reload, defer, standby, hold) and carries it out (act in
// sync.go, package apply).
// What HAProxy runs and what is written has one owner (package live): the decision reads it,
// and each outcome is recorded in it as one event.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Source is where inputs come from (see package watcher).
type Source interface {
	Run(ctx context.Context, changed func()) error
	Objects(ctx context.Context) (*snapshot.Objects, error)
}

// firstLists is a source whose first lists reach it as change notifications (the kube
// source's informers, watcher.Kube): AwaitFirstLists returns once all of them have been made.
type firstLists interface {
	AwaitFirstLists(ctx context.Context) error
}

// Config wires the stages together.
type Config struct {
	Source   Source
	Inputs   candidate.Inputs
	Renderer candidate.Renderer
	Checker  candidate.Checker // nil: no validation
	Store    *generation.Store
	Reloader reload.Reloader
	// Endpoint names the reload target in metrics and logs ("master-socket", "command", ...).
	Endpoint string
	// ReloaderCounts says the reloader counts reloads_total per endpoint itself (the Data
	// Plane API reloader, one count per host), so the pipeline does not count them again.
	ReloaderCounts bool
	// WaitMin is the quiet period after a change before rendering; WaitMax bounds how long a
	// stream of changes can postpone it.
	WaitMin, WaitMax time.Duration
	// RenderAhead reads and renders during the quiet period (ahead.go): a change goes live
	// WaitMin after it rather than WaitMin plus the render, when nothing else changes.
	RenderAhead bool
	// RetryMax bounds the backoff between retries after an operational failure (HAProxy
	// unreachable, disk errors). Bad input is not retried: it waits for the next change.
	RetryMax time.Duration
	Metrics  *status.Metrics
	Health   *status.Health
	Recorder apply.Recorder // nil: logs only
	// Standby, when it returns true, stops each sync after validation: a follower under leader
	// election renders and validates (hot standby) but does not apply. nil: always apply.
	Standby func() bool
	Logger  *slog.Logger
	// Runtime, when set, makes the changes it can through HAProxy's runtime API instead of a
	// reload (package runtimeapi). nil: every change reloads.
	Runtime apply.Runtime
	// MinReloadInterval is the least time between two reloads; a reload asked sooner waits,
	// and the latest rendering is what loads then. 0: no minimum.
	MinReloadInterval time.Duration
	// Started, when set, is called once the source's first lists are in, before the first
	// sync: the start-up is over, and what only it used may go (the binary's pages of the
	// dependencies' initialisation) before the first sync's peak of memory.
	Started func()
	// AfterSync, when set, is called after every sync, before waiting for the next change:
	// the time to give back the memory the sync used.
	AfterSync func()
	// Idle, when set, is called once the pipeline has waited IdleAfter since a sync with no
	// change coming: the time to give back what was kept for a burst of syncs (the free heap
	// the next sync would reuse). It runs on the pipeline's goroutine: no sync runs meanwhile.
	Idle func()
	// IdleAfter is how long after a sync Idle is called; 0: defaultIdleAfter.
	IdleAfter time.Duration
	// Quiet, when set, is called every IdleAfter after Idle while no change comes, on the
	// pipeline's goroutine: the time to collect what the process allocated between syncs
	// (the source's conversions, the status writer's writes) before the next sync runs into it.
	Quiet func()
	// PublishGoodInputs has the sync publish a copy of the last good inputs after each change,
	// for GoodInputs (the admission webhook, on other goroutines). Off, nothing reads it and
	// no copy is made: one map entry per input, 1.9 MB at 10,000 services.
	PublishGoodInputs bool
	// Trials bounds the renderings one search for bad inputs may try (quarantine.Search);
	// 0: quarantine.DefaultTrials.
	Trials int
	// TryTemplatesApart renders a changed template set first apart from the syncs, which go
	// on with the last good one meanwhile: a template that runs for its whole budget holds up
	// no pod or service change (candidate/trial.go).
	TryTemplatesApart bool
	// CheckAfter has an operator's change that the runtime API can make go live at once and
	// checked right after, as pod changes are (candidate.Config.CheckAfter); its inputs
	// become the last good ones once HAProxy runs it validated.
	CheckAfter bool
	// KeepInputs keeps the last good version of every input across restarts (a state file
	// of the Store), so that a restarted sidecar holds a bad input at the version HAProxy
	// already serves instead of leaving it out.
	KeepInputs bool
	// Redactor learns the private keys of the certificates as they are read, so that no
	// message can quote them. nil: none.
	Redactor *redact.Redactor
	// ProbeInterval is how often HAProxy is asked whether it runs (when the reloader can
	// tell, see loadIdentifier); 0: 2 s.
	ProbeInterval time.Duration
	// ExpectRunning says HAProxy is expected to run from the start (its configuration existed
	// before the sidecar started): not reaching it is an error, not "not running yet".
	ExpectRunning bool
	// Manifests reads the objects of a test of the templates (see candidate.Test).
	Manifests func(name string, data []byte) (*snapshot.Objects, error)
	// FindHAProxy returns the pid of a HAProxy running on the configuration, when the probe
	// cannot reach it (0: none seen); nil: not looked for.
	FindHAProxy func() int
	// ShutdownWriteTimeout bounds each write of the background writer once the sidecar stops;
	// 0: 3 s (the whole sidecar stops within 5 s of SIGTERM).
	ShutdownWriteTimeout time.Duration
	// Tracing traces each sync (a span with render, validate and apply below it); nil: none.
	Tracing trace.TracerProvider
}

// Pipeline is the running sidecar.
type Pipeline struct {
	cfg     Config
	log     *slog.Logger
	trigger chan struct{}
	writer  *generation.Writer
	build   *candidate.Builder
	apply   *apply.Applier
	// haproxy is what HAProxy runs and what is written: the one record of it, which the
	// sync, the background writer and the probe change through events.
	haproxy *live.Owner

	// Only the goroutine that runs Sync touches these.
	q           quarantine.State
	adoptTried  bool            // the first rendering was compared with what HAProxy already runs
	keysSeen    map[string]bool // certificate versions whose keys the redactor knows
	lastProblem string          // the last error reported by reportError (reported once)
	trying      bool            // inputs were being tried apart at the last sync
	// unchecked is the candidate that went live with operator inputs haproxy -c has not
	// checked yet (CheckAfter), and the inputs it was made from: they are accepted as the
	// last good ones once HAProxy runs it validated (acceptChecked).
	unchecked *wentLive
	// accepted counts the times inputs were accepted as the last good ones (accept): a
	// rendering made ahead selected with the state it had then.
	accepted uint64

	// good is what GoodInputs answers: a copy of q's good versions, published by the sync.
	good atomic.Pointer[quarantine.State]

	tracer trace.Tracer
	// notified is when Changed was first called since a sync last took it (nil: not since);
	// seen, the sync's own, when the first change not yet live was (see Sync).
	notified atomic.Pointer[time.Time]
	seen     time.Time
	// asked counts the calls of Changed: everything but HAProxy's own state (the probe) that
	// asks for a sync. A sync notes it before it reads the inputs: a count that has not moved
	// since the read of the last rendering means nothing asked for a new one since.
	asked atomic.Uint64
	// notes counts every notification (Changed and HAProxy's own state): a rendering made
	// ahead is the inputs as they are while it has not moved since its read.
	notes atomic.Uint64
	// rendered is the sync's own: the last rendering that went live (or was written for
	// HAProxy's start), and the count of asked before the read it was made from.
	rendered rendering
}

// rendering is a rendering that went live and what had been asked before it was read.
type rendering struct {
	hash  string // "": none that a sync may reuse
	asked uint64
}

// New checks the wiring and fills defaults.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Source == nil || cfg.Inputs == nil || cfg.Renderer == nil || cfg.Store == nil || cfg.Reloader == nil {
		return nil, errors.New("pipeline: source, inputs, renderer, store and reloader are required")
	}
	if cfg.WaitMin <= 0 {
		cfg.WaitMin = 200 * time.Millisecond
	}
	if cfg.WaitMax < cfg.WaitMin {
		cfg.WaitMax = cfg.WaitMin
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = status.NewMetrics()
	}
	if cfg.Health == nil {
		cfg.Health = &status.Health{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "local"
	}
	if cfg.Trials <= 0 {
		cfg.Trials = quarantine.DefaultTrials
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 2 * time.Second
	}
	if cfg.ShutdownWriteTimeout <= 0 {
		cfg.ShutdownWriteTimeout = 3 * time.Second
	}
	if cfg.Tracing == nil {
		cfg.Tracing = noop.NewTracerProvider()
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = defaultIdleAfter
	}
	if !cfg.ReloaderCounts {
		cfg.Metrics.Reloading(cfg.Endpoint)
	}
	p := &Pipeline{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1), keysSeen: map[string]bool{},
		tracer: cfg.Tracing.Tracer(tracing.Scope)}
	// What a previous run left: the live generation (the last good one until a sync knows
	// better) and the record of what HAProxy ran.
	record, _ := cfg.Store.Loaded()
	p.haproxy = live.NewOwner(live.Start(cfg.Store.Live(), record), cfg.Store.BeginLoaded,
		func(err error) { p.log.Warn("record what HAProxy runs", "error", err) })
	if cfg.Health.HAProxy == nil {
		cfg.Health.HAProxy = p.haproxy.State
	}
	cfg.Metrics.WatchHAProxy(p.haproxy.State)
	p.writer = generation.NewWriter(cfg.Store, func(ctx context.Context, g *generation.Generation) error { return p.build.Check(ctx, g) },
		candidate.IsRejected, func(w generation.Written) { p.apply.Written(w) }, cfg.ShutdownWriteTimeout)
	bc := candidate.Config{Inputs: cfg.Inputs, Renderer: cfg.Renderer, Checker: cfg.Checker, Store: cfg.Store,
		Exclusive: p.writer.Exclusive(), Manifests: cfg.Manifests, Trials: cfg.Trials, CheckAfter: cfg.CheckAfter,
		RenderDuration: cfg.Metrics.RenderDuration, ValidateDuration: cfg.Metrics.ValidateDuration}
	if cfg.TryTemplatesApart {
		bc.Tried = p.templatesTried
	}
	p.build = candidate.New(bc)
	p.apply = apply.New(apply.Config{HAProxy: p.haproxy, Writer: p.writer, Store: cfg.Store,
		Reloader: cfg.Reloader, Runtime: cfg.Runtime, Endpoint: cfg.Endpoint, ReloaderCounts: cfg.ReloaderCounts,
		ExpectRunning: cfg.ExpectRunning, FindHAProxy: cfg.FindHAProxy, Metrics: cfg.Metrics, Health: cfg.Health, Recorder: cfg.Recorder,
		Report: reporter{p}, Changed: p.Changed, ValidateNext: p.build.ValidateNext, Logger: cfg.Logger})
	p.loadInputs()
	return p, nil
}

// defaultIdleAfter is how long the pipeline waits after a sync before it calls Idle: longer
// than the gaps inside a burst of changes (a rollout, a batch of applies), so that the syncs of
// a burst keep the memory they reuse, and short enough that an idle sidecar is small soon.
const defaultIdleAfter = 5 * time.Second

// tidyInterval is how often removed servers that still had connections are deleted again
// while no change comes.
const tidyInterval = 5 * time.Second

// Run syncs once at start, then after every debounced burst of changes, until ctx ends.
func (p *Pipeline) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	trigger := p.trigger
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		p.writer.Run(ctx)
	}()
	defer func() { <-writerDone }()
	// Run returns once the source and the probe have: a source still closing its connections
	// (the etcd client's watch cancels) would otherwise log and act after the sidecar stopped.
	var started sync.WaitGroup
	defer started.Wait()
	defer cancel()
	defer p.build.StopTrial()
	if li, ok := p.cfg.Reloader.(loadIdentifier); ok {
		started.Go(func() { p.watch(ctx, li) })
	}
	srcErr := make(chan error, 1)
	p.cfg.Metrics.SourceUp.Set(1) // before Run: a source that reports its own state overrides it
	started.Go(func() { srcErr <- p.cfg.Source.Run(ctx, p.Changed) })
	if stop, err := p.awaitFirstLists(ctx, srcErr); stop {
		return err
	}
	if p.cfg.Started != nil {
		p.cfg.Started()
	}
	// What the source said while starting is read by the first sync: no change seen, and no
	// sync asked for it (the kube source's initial lists, one notification per object, asked
	// for a second full render at start that found nothing new).
	p.notified.Store(nil)
	select {
	case <-trigger:
	default:
	}

	reason := "start"
	var retry, deferred <-chan time.Time
	backoff := time.Second
	tidy := time.NewTicker(tidyInterval)
	defer tidy.Stop()
	var idle <-chan time.Time
	idled := false // Idle was called since the last sync: Quiet next
	fromNotifications := false
	var made *ahead // rendered during the quiet period (ahead.go)
sync:
	for {
		res := p.syncWith(ctx, reason, fromNotifications, made)
		fromNotifications, made = false, nil
		if p.cfg.AfterSync != nil {
			p.cfg.AfterSync()
		}
		if p.cfg.Idle != nil {
			idled, idle = false, time.After(p.cfg.IdleAfter)
		}
		if res.Outcome == apply.Deferred {
			deferred = time.After(res.ReloadIn)
		}
		retry = nil
		if res.Retry {
			p.log.Info("will retry", "in", backoff, "error", res.Err)
			retry = time.After(backoff)
			backoff = min(backoff*2, p.cfg.RetryMax)
		} else {
			backoff = time.Second
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case err := <-srcErr:
				return p.sourceStopped(ctx, err)
			case <-retry:
				reason = "retry"
				continue sync
			case <-deferred:
				reason = "deferred reload (--min-reload-interval)"
				continue sync
			case <-tidy.C:
				p.apply.Tidy(ctx)
			case <-idle:
				idle = nil
				if idled {
					p.cfg.Quiet()
				} else {
					p.cfg.Idle()
				}
				if p.cfg.Quiet != nil {
					idled, idle = true, time.After(p.cfg.IdleAfter)
				}
			case <-trigger:
				break wait
			}
		}
		n, a, err := p.debounce(ctx, trigger)
		if err != nil {
			return nil
		}
		reason = fmt.Sprintf("%d change notification(s)", n)
		fromNotifications = true
		made = a
	}
}

// awaitFirstLists waits, when the source's first lists come as change notifications, until
// all have been made: the first sync then notes what asked for it (and drops the trigger)
// after them, and its read holds every object they notified. Whatever is notified later asks
// for a sync as always. stop (with the error Run returns) when ctx ends or the source stops.
func (p *Pipeline) awaitFirstLists(ctx context.Context, srcErr <-chan error) (stop bool, _ error) {
	fl, ok := p.cfg.Source.(firstLists)
	if !ok {
		return false, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	var waiting sync.WaitGroup
	defer waiting.Wait()
	defer cancel() // before the wait (deferred calls run last first)
	waiting.Go(func() { done <- fl.AwaitFirstLists(wctx) })
	select {
	case err := <-done:
		if err != nil && ctx.Err() == nil {
			p.log.DebugContext(ctx, "the source's first lists not all seen; the first sync reads what it holds", "error", err)
		}
		return ctx.Err() != nil, nil
	case err := <-srcErr:
		return true, p.sourceStopped(ctx, err)
	case <-ctx.Done():
		return true, nil
	}
}

// sourceStopped is what Run returns once the source's Run returned err: nothing when ctx
// ended (a stop), else the source's error.
func (p *Pipeline) sourceStopped(ctx context.Context, err error) error {
	p.cfg.Metrics.SourceUp.Set(0)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("source stopped: %w", err)
}

// Changed asks for a sync (debounced) that renders again; it never blocks. Sources call it;
// so do leader election when this instance starts leading, and the writer. The first call
// since the last sync is when the change was seen (change_to_live_seconds).
func (p *Pipeline) Changed() {
	p.asked.Add(1)
	p.notify()
}

// haproxyChanged asks for a sync for HAProxy's own state (the probe saw a load the sidecar did
// not make): unless something else asks too, that sync renders nothing when HAProxy runs the
// last rendering after all (see reuse).
func (p *Pipeline) haproxyChanged() { p.notify() }

func (p *Pipeline) notify() {
	p.notes.Add(1)
	now := time.Now()
	p.notified.CompareAndSwap(nil, &now)
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// debounce waits for WaitMin without a new change, but no longer than WaitMax in all,
// rendering ahead meanwhile (ahead.go). It returns how many notifications the burst had and
// the last rendering made ahead (nil: none).
func (p *Pipeline) debounce(ctx context.Context, trigger <-chan struct{}) (int, *ahead, error) {
	n := 1
	quiet := time.NewTimer(p.cfg.WaitMin)
	defer quiet.Stop()
	deadline := time.NewTimer(p.cfg.WaitMax)
	defer deadline.Stop()
	run := p.newAheadRun()
	for {
		select {
		case <-ctx.Done():
			run.stop()
			return n, nil, ctx.Err()
		case <-trigger:
			n++
			quiet.Reset(p.cfg.WaitMin)
			run.changed()
		case <-run.settled():
			run.paused(ctx)
		case a := <-run.finished():
			run.ended(ctx, a)
		case <-quiet.C:
			a, more := run.result(trigger)
			return n + more, a, nil
		case <-deadline.C:
			a, more := run.result(trigger)
			return n + more, a, nil
		}
	}
}

func (p *Pipeline) standby() bool { return p.cfg.Standby != nil && p.cfg.Standby() }

// HAProxy is what HAProxy runs and what is written, as the sidecar knows it now.
func (p *Pipeline) HAProxy() live.State { return p.haproxy.State() }

func refObject(r snapshot.Ref) snapshot.Ref { r.Key = ""; return r }

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
