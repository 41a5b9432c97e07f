package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

// Runtime changes a running HAProxy through its runtime API where the change allows it, so
// that no reload is needed (see package runtimeapi).
type Runtime interface {
	// Plan compares a rendering with what HAProxy runs.
	Plan(config []byte, certs map[string][]byte) *runtimeapi.Plan
	// Apply makes the plan's runtime changes; on error what HAProxy runs is unknown.
	Apply(ctx context.Context, p *runtimeapi.Plan) error
	// Reloaded records that HAProxy loaded the plan's rendering.
	Reloaded(p *runtimeapi.Plan)
	// Forget records that what HAProxy runs is unknown.
	Forget()
	// Tidy deletes the removed servers HAProxy kept because they still had connections; it
	// returns how many are left.
	Tidy(ctx context.Context) int
}

// tidyInterval is how often removed servers that still had connections are deleted again
// while no change comes.
const tidyInterval = 5 * time.Second

func (p *Pipeline) tidy(ctx context.Context) {
	if p.cfg.Runtime != nil {
		if left := p.cfg.Runtime.Tidy(ctx); left > 0 {
			p.log.Debug("removed servers still holding connections, in maintenance", "servers", left)
		}
	}
}

// planRuntime compares the rendering with what HAProxy runs: why is "" when the runtime API can
// make the whole change, else why a reload is needed.
func (p *Pipeline) planRuntime(bundle *render.Bundle) (plan *runtimeapi.Plan, why string) {
	if p.cfg.Runtime == nil {
		return nil, "every change reloads (no runtime API)"
	}
	plan = p.cfg.Runtime.Plan(bundle.Config, bundle.Certificates)
	return plan, plan.Reload()
}

// runtimeUpdate makes a change live through the runtime API, at once, and hands the rendering
// to the writer, which writes and validates the generation and makes it live on disk with no
// reload, so that a later reload loads the same. done reports that the sync is over (res says
// how); otherwise fallback says why a reload is needed after all.
func (p *Pipeline) runtimeUpdate(ctx context.Context, plan *runtimeapi.Plan, bundle *render.Bundle, info snapInfo, reason string) (res Result, fallback string, done bool) {
	m := p.cfg.Metrics
	if p.runtimeHash == bundle.Hash && plan.Changes() == 0 {
		// HAProxy runs this rendering already: a sync while the writer is behind. Make sure
		// it is written; no change to count.
		p.log.Debug("runtime API: rendering already live, being written", "hash", short(bundle.Hash))
		if failed := p.write(ctx, &writeJob{bundle: bundle, info: info, reason: reason}); failed != nil {
			return *failed, "", true
		}
		return Result{Outcome: "unchanged", Hash: bundle.Hash}, "", true
	}
	start := time.Now()
	// Until the writer has made this rendering live on disk, the record of what HAProxy runs
	// would be wrong half way: forget it (the writer records it again).
	p.changingRuntime()
	if err := p.cfg.Runtime.Apply(ctx, plan); err != nil {
		m.RuntimeFallbacks.Inc()
		p.log.Warn("runtime API update failed: reloading instead", "error", err)
		return Result{}, "the runtime API update failed: " + err.Error(), false
	}
	p.countRuntime(plan)
	p.ranRuntime(bundle.Hash)
	p.reloadAt = time.Time{}
	p.runtimeHash = bundle.Hash
	m.RuntimeApplied(bundle.Hash)
	p.log.Info("configuration live without a reload", "reason", reason, "hash", short(bundle.Hash),
		"changes", plan.Summary(), "runtime_api", time.Since(start).Round(time.Microsecond))
	if failed := p.write(ctx, &writeJob{bundle: bundle, info: info, reason: reason}); failed != nil {
		return *failed, "", true
	}
	return Result{Outcome: "applied", Hash: bundle.Hash}, "", true
}

// revertRuntime brings HAProxy back to the last good rendering, through the runtime API when
// it can, else by reloading the live files (the last good generation).
func (p *Pipeline) revertRuntime(ctx context.Context) {
	var plan *runtimeapi.Plan
	if good := p.goodBundle(); good != nil && p.cfg.Runtime != nil {
		plan = p.cfg.Runtime.Plan(good.Config, good.Certificates)
		if plan.Reload() == "" {
			p.changingRuntime()
			err := p.cfg.Runtime.Apply(ctx, plan)
			if err == nil {
				p.ranRuntime(good.Hash)
				p.writtenLive(good.Hash) // the live files are the good generation's
				p.runtimeHash = ""
				p.log.Warn("runtime API changes that did not validate were taken back", "changes", plan.Summary())
				return
			}
			p.log.Error("taking back runtime API changes that did not validate failed: reloading the last good configuration", "error", err)
		}
	}
	if p.cfg.Runtime != nil {
		p.cfg.Runtime.Forget()
	}
	p.runtimeHash = ""
	p.lastReload = time.Now()
	if err := p.cfg.Reloader.Reload(ctx); err != nil {
		p.log.Error("reload of the last good configuration", "error", err)
		p.setLoad("", "", true)
		return
	}
	if plan != nil {
		p.cfg.Runtime.Reloaded(plan)
	}
	if good := p.goodBundle(); good != nil {
		p.recordLoad(ctx, good.Hash, true)
	}
}

func (p *Pipeline) countRuntime(plan *runtimeapi.Plan) {
	for kind, n := range plan.Counts() {
		p.cfg.Metrics.RuntimeUpdates.WithLabelValues(kind).Add(float64(n))
	}
}

// deferReload holds a reload asked within MinReloadInterval of the previous one: the changes
// the runtime API can make are made now, and the reload happens when the interval is over,
// with whatever the inputs are then (latest wins).
func (p *Pipeline) deferReload(ctx context.Context, plan *runtimeapi.Plan, bundle *render.Bundle, why string) (Result, bool) {
	if p.cfg.MinReloadInterval <= 0 || p.lastReload.IsZero() {
		return Result{}, false
	}
	at := p.lastReload.Add(p.cfg.MinReloadInterval)
	wait := time.Until(at)
	if wait <= 0 {
		return Result{}, false
	}
	if plan != nil && plan.Changes() > 0 {
		p.changingRuntime() // HAProxy will run no rendering until the reload
		if err := p.cfg.Runtime.Apply(ctx, plan); err != nil {
			p.log.Debug("runtime API update while a reload waits failed; the reload will load it", "error", err)
		} else {
			p.countRuntime(plan)
			p.runtimeHash = "partial" // no rendering: the old one with some of the new servers
			p.log.Info("made at runtime while the reload waits", "changes", plan.Summary())
		}
	}
	p.reloadAt = at
	if err := p.cfg.Store.Prune(); err != nil {
		p.log.Warn("prune old generations", "error", err)
	}
	p.log.Info("reload deferred (--min-reload-interval)", "why", why, "in", wait.Round(time.Millisecond), "hash", short(bundle.Hash))
	return Result{Outcome: "deferred", Hash: bundle.Hash, ReloadIn: wait}, true
}

// reloadDone records a reload's outcome for the reload interval and the runtime API.
func (p *Pipeline) reloadDone(plan *runtimeapi.Plan, err error) {
	notRunning := errors.Is(err, reload.ErrNotRunning)
	if !notRunning {
		p.lastReload = time.Now()
	}
	p.reloadAt = time.Time{}
	var failed *reload.Failed
	switch {
	case err == nil || notRunning:
		// HAProxy runs the files just made live (or loads them when it starts).
		p.runtimeHash = ""
		if p.cfg.Runtime != nil {
			p.cfg.Runtime.Reloaded(plan)
		}
	case errors.As(err, &failed):
		// Refused: the previous workers keep running what they ran.
	default:
		p.runtimeHash = "unknown"
		if p.cfg.Runtime != nil {
			p.cfg.Runtime.Forget()
		}
	}
}

// writer writes the renderings the runtime API made live as generations (stage, haproxy -c,
// activate, no reload) in its own goroutine, so that a stream of changes is not held up by
// haproxy -c: only the latest pending rendering is written. Whatever else touches the store
// (the reload path, validation of a rejected input) waits for it first (flushWrites). A
// rendering haproxy -c rejects is remembered: the next sync takes the runtime changes back.
type writer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	busy    bool
	pending *writeJob
	wake    chan struct{}
	invalid map[string]error // hash -> why haproxy -c rejected it
	order   []string         // invalid hashes, oldest first (bounded)
}

type writeJob struct {
	bundle *render.Bundle
	info   snapInfo
	reason string
	queued time.Time
}

// shutdownWriteTimeout bounds each write once the sidecar stops (a variable for the tests).
var shutdownWriteTimeout = 10 * time.Second

// rememberedInvalid bounds the rejected renderings the writer remembers.
const rememberedInvalid = 16

// startWriter runs the writer until ctx ends; the channel is closed once it has stopped.
func (p *Pipeline) startWriter(ctx context.Context) <-chan struct{} {
	w := &p.writer
	w.mu.Lock()
	w.init()
	w.running = true
	w.mu.Unlock()
	done := make(chan struct{})
	// A write under way when the sidecar stops is finished, and the last rendering the runtime
	// API made live is written before the writer exits: HAProxy runs it already, and the files
	// must say so (for HAProxy's next start, and for the sidecar's: see adopt). Once ctx is
	// done, each write has shutdownWriteTimeout left.
	write := func(job *writeJob) (rejected, err error) {
		jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownWriteTimeout, cancel) })
		defer stop()
		return p.writeNow(jctx, job)
	}
	lastWrite := func(job *writeJob) {
		if _, err := write(job); err != nil {
			p.log.Warn("could not write the last runtime API change before stopping", "hash", short(job.bundle.Hash), "error", err)
		}
	}
	go func() {
		defer close(done)
		defer func() {
			w.mu.Lock()
			job := w.pending // handed over while the writer was deciding to stop
			w.running, w.pending = false, nil
			w.busy = job != nil
			w.mu.Unlock()
			if job != nil {
				lastWrite(job)
			}
			w.mu.Lock()
			w.busy = false
			w.cond.Broadcast()
			w.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
			case <-w.wake:
			}
			stopping := ctx.Err() != nil
			w.mu.Lock()
			job := w.pending
			w.pending = nil
			w.busy = job != nil
			w.mu.Unlock()
			if job == nil {
				if stopping {
					return
				}
				continue
			}
			rejected, err := write(job)
			w.mu.Lock()
			w.busy = false
			w.cond.Broadcast()
			w.mu.Unlock()
			switch {
			case stopping:
				if err != nil {
					p.log.Warn("could not write the last runtime API change before stopping", "hash", short(job.bundle.Hash), "error", err)
				}
				return
			case ctx.Err() != nil:
				// Stopping now: the loop writes what is pending, if anything, and returns.
			case rejected != nil:
				// The next sync takes the runtime changes back and reports the rejection.
				p.Changed()
			case err != nil:
				// Disk trouble: the next sync tries again, after a pause.
				p.fail(err)
				time.AfterFunc(time.Second, p.Changed)
			}
		}
	}()
	return done
}

func (w *writer) init() {
	if w.cond == nil {
		w.cond = sync.NewCond(&w.mu)
		w.wake = make(chan struct{}, 1)
		w.invalid = map[string]error{}
	}
}

// write hands a rendering to the writer; without a running writer (Sync called outside Run) it
// writes at once and returns the failure, if any, after taking the runtime changes back.
func (p *Pipeline) write(ctx context.Context, job *writeJob) *Result {
	w := &p.writer
	job.queued = time.Now()
	w.mu.Lock()
	w.init()
	if w.running {
		w.pending = job
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return nil
	}
	w.mu.Unlock()
	rejected, err := p.writeNow(ctx, job)
	switch {
	case rejected != nil:
		p.revertRuntime(ctx)
		res := p.reject(snapshot.StageValidate, rejected)
		return &res
	case err != nil:
		res := p.fail(err)
		return &res
	}
	return nil
}

// flushWrites drops the rendering waiting to be written (the caller writes a newer one) and
// waits for the one being written.
func (p *Pipeline) flushWrites() {
	w := &p.writer
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	w.pending = nil
	for w.busy {
		w.cond.Wait()
	}
}

// rejected returns why haproxy -c rejected the rendering with this hash, nil if it did not.
func (w *writer) rejected(hash string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.invalid[hash]
}

func (w *writer) remember(hash string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	if _, ok := w.invalid[hash]; !ok {
		w.order = append(w.order, hash)
	}
	w.invalid[hash] = err
	for len(w.order) > rememberedInvalid {
		delete(w.invalid, w.order[0])
		w.order = w.order[1:]
	}
}

// writeNow stages, validates and activates a rendering HAProxy already runs. rejected: haproxy
// -c refused it (remembered, for the next sync to take it back); err: an operational failure.
// Neither is reported here.
func (p *Pipeline) writeNow(ctx context.Context, job *writeJob) (rejected, err error) {
	start := time.Now()
	gen, rejected, err := p.stageCheck(ctx, job.bundle, job.info)
	if rejected != nil {
		p.writer.remember(job.bundle.Hash, rejected)
		return rejected, nil
	}
	if err != nil {
		return nil, err
	}
	if err := p.cfg.Store.Activate(gen); err != nil {
		return nil, fmt.Errorf("activate generation (HAProxy already runs it through the runtime API): %w", err)
	}
	p.cfg.Store.MarkGood(gen)
	p.setGood(job.bundle)
	p.writtenLive(job.bundle.Hash)
	p.applied(job.info, job.bundle, job.reason)
	p.log.Debug("generation written and validated", "hash", short(job.bundle.Hash),
		"waited", start.Sub(job.queued).Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return nil, nil
}

// setGood records the rendering of the last good generation (what a revert goes back to).
func (p *Pipeline) setGood(b *render.Bundle) {
	p.goodMu.Lock()
	p.good = b
	p.goodMu.Unlock()
}

func (p *Pipeline) goodBundle() *render.Bundle {
	p.goodMu.Lock()
	defer p.goodMu.Unlock()
	return p.good
}
