// Package pipeline runs the sidecar's one linear flow: source -> debounce -> snapshot -> render
// -> validate -> apply (atomic generation swap, confirmed reload, rollback on failure).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
	"github.com/haproxy-sidecar/haproxy-sidecar/validate"
)

// Source is where inputs come from (see package watcher).
type Source interface {
	Run(ctx context.Context, changed func()) error
	Objects(ctx context.Context) (*snapshot.Objects, error)
}

// Renderer turns a snapshot into files.
type Renderer interface {
	Render(s *snapshot.Snapshot) (*render.Bundle, error)
}

// Checker validates a configuration file (haproxy -c).
type Checker interface {
	Check(ctx context.Context, cfgPath string) error
}

// Store keeps the on-disk generations HAProxy reads (see package generation).
type Store interface {
	Stage(config []byte, certs map[string][]byte, hash string) (*generation.Generation, error)
	CheckFile(g *generation.Generation) (string, error)
	Live() *generation.Generation
	Activate(g *generation.Generation) error
	Rollback() error
	MarkGood(g *generation.Generation)
	Prune() error
	SetLoaded(l generation.Loaded) error
	Loaded() (generation.Loaded, bool)
}

// loadIdentifier is a reloader that can tell which load of HAProxy runs now (see
// reload.MasterSocket.LoadID): with it, a restarted sidecar leaves HAProxy alone when HAProxy
// still runs what the sidecar last made live.
type loadIdentifier interface {
	LoadID(ctx context.Context) (string, error)
}

// Recorder tells operators, on the object they edited, what became of their change
// (Kubernetes Events in the Kubernetes modes). Implementations must rate-limit themselves.
type Recorder interface {
	Event(ref snapshot.Ref, warning bool, reason, message string)
}

// Config wires the stages together.
type Config struct {
	Source   Source
	Build    func(*snapshot.Objects) (*snapshot.Snapshot, error)
	Renderer Renderer
	Checker  Checker // nil: no validation
	Store    Store
	Reloader reload.Reloader
	// Endpoint names the reload target in metrics and logs ("master-socket", "command", ...).
	Endpoint string
	// ReloaderCounts says the reloader counts reloads_total per endpoint itself (the Data
	// Plane API reloader, one count per host), so the pipeline does not count them again.
	ReloaderCounts bool
	// WaitMin is the quiet period after a change before rendering; WaitMax bounds how long a
	// stream of changes can postpone it.
	WaitMin, WaitMax time.Duration
	// RetryMax bounds the backoff between retries after an operational failure (HAProxy
	// unreachable, disk errors). Bad input is not retried: it waits for the next change.
	RetryMax time.Duration
	Metrics  *status.Metrics
	Health   *status.Health
	Recorder Recorder // nil: logs only
	// Standby, when it returns true, stops each sync after validation: a follower under leader
	// election renders and validates (hot standby) but does not apply. nil: always apply.
	Standby func() bool
	Logger  *slog.Logger
	// Runtime, when set, makes the changes it can through HAProxy's runtime API instead of a
	// reload (see runtime.go). nil: every change reloads.
	Runtime Runtime
	// MinReloadInterval is the least time between two reloads; a reload asked sooner waits,
	// and the latest rendering is what loads then. 0: no minimum.
	MinReloadInterval time.Duration
	// AfterSync, when set, is called after every sync, before waiting for the next change:
	// the time to give back the memory the sync used.
	AfterSync func()
}

// Pipeline is the running sidecar.
type Pipeline struct {
	cfg     Config
	log     *slog.Logger
	trigger chan struct{}

	// Only the goroutine that runs Sync touches these.
	lastReload time.Time // when the last reload was asked
	reloadAt   time.Time // a deferred reload is due then (zero: none)
	// runtimeHash is the rendering the runtime API made live last, which the files on disk
	// may not show yet (the writer is behind); "" when HAProxy runs the live files.
	runtimeHash string

	writer writer // writes runtime API changes as generations, in the background (runtime.go)
	goodMu sync.Mutex
	good   *render.Bundle // the rendering of the last good generation

	// What HAProxy runs, for the record a restarted sidecar reads (see adopt). Changed only
	// under loadMu, together with the record, so that the writer (another goroutine) never
	// records a rendering HAProxy no longer runs.
	loadMu sync.Mutex
	loadID string // the HAProxy load the sidecar made or adopted ("": not known)
	runs   string // the rendering HAProxy runs under loadID ("": not known, or changing)

	adoptTried bool // the first rendering was compared with what HAProxy already runs
}

// New checks the wiring and fills defaults.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Source == nil || cfg.Build == nil || cfg.Renderer == nil || cfg.Store == nil || cfg.Reloader == nil {
		return nil, errors.New("pipeline: source, build, renderer, store and reloader are required")
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
	return &Pipeline{cfg: cfg, log: cfg.Logger, trigger: make(chan struct{}, 1)}, nil
}

// Run syncs once at start, then after every debounced burst of changes, until ctx ends.
func (p *Pipeline) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	trigger := p.trigger
	writerDone := p.startWriter(ctx)
	defer func() { <-writerDone }()
	defer cancel()
	srcErr := make(chan error, 1)
	p.cfg.Metrics.SourceUp.Set(1) // before Run: a source that reports its own state overrides it
	go func() { srcErr <- p.cfg.Source.Run(ctx, p.Changed) }()

	reason := "start"
	var retry, deferred <-chan time.Time
	backoff := time.Second
	tidy := time.NewTicker(tidyInterval)
	defer tidy.Stop()
sync:
	for {
		res := p.Sync(ctx, reason)
		if p.cfg.AfterSync != nil {
			p.cfg.AfterSync()
		}
		if res.Outcome == "deferred" {
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
				p.cfg.Metrics.SourceUp.Set(0)
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("source stopped: %w", err)
			case <-retry:
				reason = "retry"
				continue sync
			case <-deferred:
				reason = "deferred reload (--min-reload-interval)"
				continue sync
			case <-tidy.C:
				p.tidy(ctx)
			case <-trigger:
				break wait
			}
		}
		n, err := p.debounce(ctx, trigger)
		if err != nil {
			return nil
		}
		reason = fmt.Sprintf("%d change notification(s)", n)
	}
}

// Changed asks for a sync (debounced); it never blocks. Sources call it; so does leader
// election when this instance starts leading.
func (p *Pipeline) Changed() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// debounce waits for WaitMin without a new change, but no longer than WaitMax in all. It
// returns how many notifications the burst had.
func (p *Pipeline) debounce(ctx context.Context, trigger <-chan struct{}) (int, error) {
	n := 1
	quiet := time.NewTimer(p.cfg.WaitMin)
	defer quiet.Stop()
	deadline := time.NewTimer(p.cfg.WaitMax)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-trigger:
			n++
			quiet.Reset(p.cfg.WaitMin)
		case <-quiet.C:
			return n, nil
		case <-deadline.C:
			return n, nil
		}
	}
}

// Result says what one Sync did.
type Result struct {
	// Outcome: "applied", "unchanged", "rejected" (bad input; waits for a change), "error"
	// (operational failure).
	Outcome string
	Hash    string
	Err     error
	// Retry is set when the failure was operational and worth retrying without a new change.
	Retry bool
	// Reloaded is set when the change went live through a reload (not the runtime API).
	Reloaded bool
	// ReloadIn is, with Outcome "deferred", when the deferred reload is due.
	ReloadIn time.Duration
}

// Sync reads the inputs once and takes them as far as they go: live on success, rejected with
// the reason otherwise. The last good configuration stays live whatever happens here.
func (p *Pipeline) Sync(ctx context.Context, reason string) Result {
	m := p.cfg.Metrics
	start := time.Now()
	objs, err := p.cfg.Source.Objects(ctx)
	if err != nil {
		var ie *snapshot.InputError
		if !errors.As(err, &ie) {
			return p.fail(fmt.Errorf("read inputs: %w", err))
		}
		return p.reject(snapshot.StageDecode, err)
	}
	snap, err := p.cfg.Build(objs)
	if err != nil {
		return p.reject(snapshot.StageDecode, err)
	}
	bundle, err := p.cfg.Renderer.Render(snap)
	// From here on only a few facts about the snapshot are needed: the rest of it (every
	// service with its pods) can be collected while the sync goes on.
	info := infoOf(snap, objs.Revision)
	objs, snap = nil, nil
	m.RenderDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return p.reject(snapshot.StageRender, err)
	}
	if !p.adoptTried && !p.standby() {
		p.adoptTried = true
		if res, ok := p.adopt(ctx, bundle, reason); ok {
			return res
		}
	}
	if live := p.cfg.Store.Live(); live != nil && live.Hash == bundle.Hash && p.cfg.Health.LiveHash() == bundle.Hash && p.reloadAt.IsZero() &&
		(p.runtimeHash == "" || p.runtimeHash == bundle.Hash) {
		m.Renders.WithLabelValues("unchanged").Inc()
		m.ConfigValid.Set(1)
		p.cfg.Health.Live(bundle.Hash) // still live; clears an error the operator has since fixed
		p.log.Debug("render unchanged, nothing to do", "reason", reason, "hash", short(bundle.Hash))
		return Result{Outcome: "unchanged", Hash: bundle.Hash}
	}
	m.Renders.WithLabelValues("success").Inc()

	if err := p.writer.rejected(bundle.Hash); err != nil {
		// haproxy -c rejected this rendering after the runtime API had made it live.
		p.flushWrites()
		p.revertRuntime(ctx)
		return p.reject(snapshot.StageValidate, err)
	}
	plan, why := p.planRuntime(bundle)
	if why == "" && !p.standby() {
		res, fallback, done := p.runtimeUpdate(ctx, plan, bundle, info, reason)
		if done {
			return res
		}
		why = fallback
	}
	p.flushWrites() // the generations the writer has not written yet are older than this one
	gen, failed := p.stage(ctx, bundle, info)
	if failed != nil {
		return *failed
	}
	if p.standby() {
		_ = p.cfg.Store.Prune()
		p.cfg.Health.Standby(bundle.Hash)
		p.log.Info("standby: configuration rendered and valid, not applied (not the leader)", "reason", reason, "hash", short(bundle.Hash))
		return Result{Outcome: "standby", Hash: bundle.Hash}
	}

	if res, deferred := p.deferReload(ctx, plan, bundle, why); deferred {
		return res
	}
	p.log.Info("reloading HAProxy", "why", why, "hash", short(bundle.Hash))
	if err := p.cfg.Store.Activate(gen); err != nil {
		return p.fail(fmt.Errorf("activate generation: %w", err))
	}
	rstart := time.Now()
	err = p.cfg.Reloader.Reload(ctx)
	took := time.Since(rstart)
	p.reloadDone(plan, err)
	switch {
	case err == nil:
		m.ReloadSucceeded(p.countedEndpoint(), took, bundle.Hash)
		p.log.Info("configuration live", "reason", reason, "hash", short(bundle.Hash),
			"revision", info.revision, "services", info.services, "certificates", info.certificates, "reload", took.Round(time.Millisecond))
	case errors.Is(err, reload.ErrNotRunning):
		// The files are in place: HAProxy loads them when it starts.
		p.log.Info("configuration written; HAProxy is not running yet and will load it at start",
			"reason", reason, "hash", short(bundle.Hash), "error", err)
	default:
		var failed *reload.Failed
		rbErr := p.cfg.Store.Rollback()
		if rbErr != nil {
			p.log.Error("rollback to the last good generation failed", "error", rbErr)
		}
		if errors.As(err, &failed) {
			if !p.cfg.ReloaderCounts {
				m.Reloads.WithLabelValues(p.cfg.Endpoint, "failed").Inc()
			}
			_ = p.cfg.Store.Prune()
			return p.reject(snapshot.StageReload, &snapshot.InputError{Stage: snapshot.StageReload, Ref: info.templateRef,
				Err: fmt.Errorf("HAProxy refused the new configuration at reload (the previous one keeps serving): %w", err)})
		}
		if !p.cfg.ReloaderCounts {
			m.Reloads.WithLabelValues(p.cfg.Endpoint, "error").Inc()
		}
		p.setLoad("", "", true) // the reload's outcome is not known
		return p.fail(fmt.Errorf("reload: %w", err))
	}
	p.cfg.Store.MarkGood(gen)
	p.setGood(bundle)
	p.recordLoad(ctx, bundle.Hash, err == nil)
	p.applied(info, bundle, reason)
	return Result{Outcome: "applied", Hash: bundle.Hash, Reloaded: true}
}

// adopt leaves HAProxy alone at start when it runs what the rendering asks for already: the
// live generation is this rendering and HAProxy's load is the one recorded when it was made
// live (by an earlier run of the sidecar). Without this, restarting the sidecar would reload
// HAProxy. ok is false when that cannot be shown; the sync then goes on as usual.
func (p *Pipeline) adopt(ctx context.Context, bundle *render.Bundle, reason string) (Result, bool) {
	li, canTell := p.cfg.Reloader.(loadIdentifier)
	live := p.cfg.Store.Live()
	rec, recorded := p.cfg.Store.Loaded()
	if !canTell || !recorded || live == nil || live.Hash != bundle.Hash || rec.Hash != bundle.Hash {
		return Result{}, false
	}
	id, err := li.LoadID(ctx)
	if err != nil || id != rec.LoadID {
		p.log.Info("HAProxy may not run the live configuration: it will be reloaded",
			"recorded_load", rec.LoadID, "load", id, "error", err)
		return Result{}, false
	}
	p.setLoad(bundle.Hash, id, false)
	if p.cfg.Runtime != nil {
		plan, _ := p.planRuntime(bundle)
		p.cfg.Runtime.Reloaded(plan)
	}
	p.cfg.Store.MarkGood(live)
	p.setGood(bundle)
	m := p.cfg.Metrics
	m.Renders.WithLabelValues("unchanged").Inc()
	m.ConfigValid.Set(1)
	p.cfg.Health.Live(bundle.Hash)
	p.log.Info("HAProxy already runs this configuration: no reload", "reason", reason, "hash", short(bundle.Hash), "load", id)
	return Result{Outcome: "unchanged", Hash: bundle.Hash}, true
}

// recordLoad records, after a reload, which load of HAProxy runs the rendering hash (see
// adopt); confirmed is false when HAProxy was not running (it loads the files when it starts,
// as a load nobody can name yet).
func (p *Pipeline) recordLoad(ctx context.Context, hash string, confirmed bool) {
	id := ""
	if li, ok := p.cfg.Reloader.(loadIdentifier); ok && confirmed {
		var err error
		if id, err = li.LoadID(ctx); err != nil {
			p.log.Debug("cannot tell which load of HAProxy runs the new configuration", "error", err)
			id = ""
		}
	}
	p.setLoad(hash, id, true)
}

// setLoad records that HAProxy runs the rendering hash under load id ("": not known), and
// writes the record when store is set.
func (p *Pipeline) setLoad(hash, id string, store bool) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.loadID, p.runs = id, hash
	if id == "" {
		p.runs = ""
	}
	if store {
		p.storeLoadedLocked()
	}
}

// changingRuntime is called before the runtime API changes what HAProxy runs: until the
// change is written (writtenLive), no rendering is what HAProxy runs for sure.
func (p *Pipeline) changingRuntime() {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.runs = ""
	p.storeLoadedLocked()
}

// ranRuntime is called once the runtime API made the rendering hash live (the load is the
// same: runtime changes do not reload).
func (p *Pipeline) ranRuntime(hash string) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if p.loadID != "" {
		p.runs = hash
	}
}

// writtenLive is called by the writer once a rendering HAProxy got through the runtime API is
// live on disk: recorded if HAProxy still runs it (no newer runtime change since).
func (p *Pipeline) writtenLive(hash string) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if p.runs == hash {
		p.storeLoadedLocked()
	}
}

// storeLoadedLocked writes the record of what HAProxy runs (none when it is not known).
func (p *Pipeline) storeLoadedLocked() {
	l := generation.Loaded{Hash: p.runs, LoadID: p.loadID}
	if p.runs == "" || p.loadID == "" {
		l = generation.Loaded{}
	}
	if err := p.cfg.Store.SetLoaded(l); err != nil {
		p.log.Warn("record what HAProxy runs", "error", err)
	}
}

// snapInfo is what the stages after rendering need to know of a snapshot.
type snapInfo struct {
	templateRef, servicesRef snapshot.Ref
	services, certificates   int
	revision                 string
}

func infoOf(s *snapshot.Snapshot, revision string) snapInfo {
	return snapInfo{templateRef: s.TemplateRef, servicesRef: s.ServicesRef,
		services: len(s.Services), certificates: len(s.Certificates), revision: revision}
}

// stage writes the bundle as a new generation and validates it (haproxy -c): the generation,
// or the Result of the failure (reported).
func (p *Pipeline) stage(ctx context.Context, bundle *render.Bundle, info snapInfo) (*generation.Generation, *Result) {
	gen, rejected, err := p.stageCheck(ctx, bundle, info)
	switch {
	case rejected != nil:
		res := p.reject(snapshot.StageValidate, rejected)
		return nil, &res
	case err != nil:
		res := p.fail(err)
		return nil, &res
	}
	return gen, nil
}

// stageCheck is stage without reporting: rejected is bad input (haproxy -c refused it), err
// an operational failure.
func (p *Pipeline) stageCheck(ctx context.Context, bundle *render.Bundle, info snapInfo) (gen *generation.Generation, rejected, err error) {
	m := p.cfg.Metrics
	gen, err = p.cfg.Store.Stage(bundle.Config, bundle.Certificates, bundle.Hash)
	if err != nil {
		return nil, nil, fmt.Errorf("stage generation: %w", err)
	}
	if p.cfg.Checker != nil {
		checkPath, err := p.cfg.Store.CheckFile(gen)
		if err != nil {
			return nil, nil, fmt.Errorf("prepare validation: %w", err)
		}
		vstart := time.Now()
		err = p.cfg.Checker.Check(ctx, checkPath)
		m.ValidateDuration.Observe(time.Since(vstart).Seconds())
		if err != nil {
			_ = p.cfg.Store.Prune()
			var ce *validate.CheckError
			if !errors.As(err, &ce) {
				return nil, nil, fmt.Errorf("validate: %w", err)
			}
			return nil, &snapshot.InputError{Stage: snapshot.StageValidate, Ref: info.templateRef,
				Err: fmt.Errorf("haproxy -c rejected the rendered configuration%s: %w", renderedLine(bundle.Config, ce.Line), err)}, nil
		}
	}
	m.ConfigValid.Set(1)
	return gen, nil, nil
}

func (p *Pipeline) standby() bool { return p.cfg.Standby != nil && p.cfg.Standby() }

// applied finishes a change that went live: old generations pruned, health and events.
func (p *Pipeline) applied(info snapInfo, bundle *render.Bundle, reason string) {
	if err := p.cfg.Store.Prune(); err != nil {
		p.log.Warn("prune old generations", "error", err)
	}
	p.cfg.Health.Live(bundle.Hash)
	if p.cfg.Recorder != nil {
		msg := fmt.Sprintf("configuration %s is live (%s)", short(bundle.Hash), reason)
		if info.templateRef != (snapshot.Ref{}) {
			p.cfg.Recorder.Event(refObject(info.templateRef), false, "Applied", msg)
		}
		if info.servicesRef != (snapshot.Ref{}) {
			p.cfg.Recorder.Event(refObject(info.servicesRef), false, "Applied", msg)
		}
	}
}

// reject reports bad input: the operator must fix it; nothing changes where HAProxy reads.
func (p *Pipeline) reject(stage string, err error) Result {
	var ie *snapshot.InputError
	if errors.As(err, &ie) && ie.Stage != "" {
		stage = ie.Stage
	}
	m := p.cfg.Metrics
	m.Rejected.WithLabelValues(stage).Inc()
	if stage == snapshot.StageRender || stage == snapshot.StageDecode {
		m.Renders.WithLabelValues("error").Inc()
	}
	m.ConfigValid.Set(0)
	p.cfg.Health.Failed(err)
	attrs := []any{"stage", stage, "error", err}
	if ie != nil {
		attrs = append(attrs, "object", ie.Ref.String())
	}
	if p.cfg.Health.Ready() {
		p.log.Error("input rejected; the last good configuration keeps serving", attrs...)
	} else {
		p.log.Error("input rejected; no configuration is live yet", attrs...)
	}
	if p.cfg.Recorder != nil && ie != nil && ie.Ref.Kind != "" && ie.Ref.Kind != "File" {
		p.cfg.Recorder.Event(refObject(ie.Ref), true, "Rejected", err.Error())
	}
	return Result{Outcome: "rejected", Err: err}
}

// fail reports an operational failure, which is retried with backoff.
func (p *Pipeline) fail(err error) Result {
	p.cfg.Health.Failed(err)
	p.log.Error("sync failed; the last good configuration keeps serving", "error", err)
	return Result{Outcome: "error", Err: err, Retry: true}
}

// countedEndpoint is the endpoint label the pipeline counts reloads under ("" when the
// reloader counts them).
func (p *Pipeline) countedEndpoint() string {
	if p.cfg.ReloaderCounts {
		return ""
	}
	return p.cfg.Endpoint
}

func refObject(r snapshot.Ref) snapshot.Ref { r.Key = ""; return r }

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// renderedLine quotes line n of the rendered configuration, so that the operator sees what the
// template produced where HAProxy complains.
func renderedLine(config []byte, n int) string {
	if n <= 0 {
		return ""
	}
	lines := strings.Split(string(config), "\n")
	if n > len(lines) {
		return ""
	}
	return fmt.Sprintf(" (rendered line %d: %q)", n, strings.TrimSpace(lines[n-1]))
}
