package pipeline

import (
	"context"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/memory"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Rendering ahead (--render-ahead). The quiet period of --wait (MIN) is time the sync used
// to spend waiting, and then it read and rendered: a change went live MIN plus the render
// after it. Now, a few milliseconds into the quiet period, the inputs are read and rendered
// in the background; when MIN has passed with nothing else notified since that read, the sync
// takes that rendering and goes on from there (plan, decide, apply), as it would have with
// its own. What goes live is the same: the rendering of the inputs as they are when the
// quiet period ends. A change that comes during it makes the rendering under way stale: it is
// cut short (the renderer keeps for the next render what it did not reach), and another starts
// a few milliseconds after; at most aheadTries a burst, so that a long burst (a rollout) costs
// a few renders more, not one per change. Only the plain way of a sync
// renders ahead (candidate.Builder.MakeAhead: nothing to validate first, nothing held or
// tried apart); anything else is left to the sync.

// aheadSettle is how long the changes pause before a rendering ahead starts (half the quiet
// period when that is shorter): the objects of one kubectl apply come a few milliseconds
// apart, and a rendering started before the last is stale. Since a stale one is cut short at
// the next change (its work not lost: the renderer keeps what it did not reach), a short pause
// costs little and starts the last one sooner (5 ms rather than 10: a path change at 10,000
// Ingresses live 5-7 ms sooner; docs/performance.md). aheadTries bounds the renderings ahead
// of one burst. The flag's help and docs/flags.md say them: config owns them.
const (
	aheadSettle = config.AheadSettle
	aheadTries  = config.AheadTries
)

// ahead is a rendering made during the quiet period, and what the sync needs to tell whether
// it is still the rendering of the inputs as they are.
type ahead struct {
	notes    uint64 // p.notes before its read: any notification since makes it stale
	asked    uint64 // p.asked before its read
	accepted uint64 // p.accepted when it started: the quarantine state it selected with
	cur      snapshot.Inputs
	made     candidate.Made
	st       stages
}

// prepare reads the inputs and makes their rendering as the sync would when that is the
// sync's plain way (MakeAhead); nil otherwise, or when ctx ends. It runs apart from the
// sync's goroutine while that one waits in debounce: q is a copy of the quarantine state.
func (p *Pipeline) prepare(ctx context.Context, q quarantine.State, accepted uint64) *ahead {
	a := &ahead{notes: p.notes.Load(), asked: p.asked.Load(), accepted: accepted}
	a.st = stages{start: time.Now(), gc0: memory.Collections(), ahead: true}
	objs, err := p.cfg.Source.Objects(ctx)
	a.st.read = time.Now()
	if err != nil || ctx.Err() != nil {
		return nil
	}
	a.cur = p.build.Decode(objs)
	made, ok := p.build.MakeAhead(ctx, objs, a.cur, &q)
	if !ok || ctx.Err() != nil {
		return nil
	}
	a.made, a.st.built = made, time.Now()
	return a
}

// syncAhead goes on with the rendering a made ahead, when it is still that of the inputs as
// they are: nothing notified since its read, no other inputs accepted as good, nothing to
// validate before it goes live. ok false: the sync reads and renders itself.
func (p *Pipeline) syncAhead(ctx context.Context, reason string, a *ahead) (res apply.Result, ok bool) {
	p.acceptChecked()
	if p.notes.Load() != a.notes || p.accepted != a.accepted || p.HAProxy().Runs == "" || p.build.WillValidate() {
		p.cfg.Metrics.RendersAhead.WithLabelValues("discarded").Inc()
		return apply.Result{}, false
	}
	p.cfg.Metrics.RendersAhead.WithLabelValues("used").Inc()
	// The trace of the change shows its render where it was, inside the quiet period.
	_, span := p.tracer.Start(ctx, "render", trace.WithTimestamp(a.st.read), trace.WithAttributes(attribute.Bool("render.ahead", true)))
	span.End(trace.WithTimestamp(a.st.built))
	p.rendered = rendering{}
	p.learnKeys(a.cur)
	return p.finish(ctx, reason, a.asked, a.cur, a.made, a.st), true
}

// aheadRun is the renderings ahead of one burst, driven by debounce.
type aheadRun struct {
	p         *Pipeline
	settleFor time.Duration
	settle    *time.Timer
	done      chan *ahead // the one under way reports here (nil: none under way)
	cancel    context.CancelFunc
	tries     int
	again     bool   // the pause came while one was under way: start another once it ends
	cut       bool   // the one under way was cut short by a change
	got       *ahead // the last one made
}

// newAheadRun is the renderings ahead of a burst that has just begun; nil when off.
func (p *Pipeline) newAheadRun() *aheadRun {
	if !p.cfg.RenderAhead {
		return nil
	}
	settle := min(aheadSettle, p.cfg.WaitMin/2)
	return &aheadRun{p: p, settleFor: settle, settle: time.NewTimer(settle)}
}

// settled is the timer of the pause after the last change (nil channel: none to wait for).
func (r *aheadRun) settled() <-chan time.Time {
	if r == nil {
		return nil
	}
	return r.settle.C
}

// finished is where the rendering under way reports (nil channel: none under way).
func (r *aheadRun) finished() <-chan *ahead {
	if r == nil {
		return nil
	}
	return r.done
}

// changed: another change of the burst. What is under way is stale: it is cut short (the
// renderer keeps the iterations and modules it did not reach: render.Renderer.Render), and
// the next starts after the pause, once it has ended.
func (r *aheadRun) changed() {
	if r == nil {
		return
	}
	r.again = false
	r.cutShort()
	if r.tries < aheadTries {
		r.settle.Reset(r.settleFor)
	}
}

// cutShort: what was made is stale, and so is what is under way, which is cut short once.
func (r *aheadRun) cutShort() {
	r.got = nil
	if r.done != nil && !r.cut {
		r.cut = true
		r.cancel()
	}
}

// paused: no change for the pause (settleFor).
func (r *aheadRun) paused(ctx context.Context) {
	if r.done != nil {
		r.again = true
		return
	}
	r.start(ctx)
}

// ended takes the report of the one under way.
func (r *aheadRun) ended(ctx context.Context, a *ahead) {
	r.cancel() // its context's resources
	r.done, r.cancel = nil, nil
	cut := r.cut
	r.cut = false
	switch {
	case a == nil && cut:
		r.p.cfg.Metrics.RendersAhead.WithLabelValues("discarded").Inc()
	case a == nil:
	case a.notes == r.p.notes.Load():
		r.got = a
	default:
		r.p.cfg.Metrics.RendersAhead.WithLabelValues("discarded").Inc()
	}
	if r.again {
		r.again = false
		r.start(ctx)
	}
}

// start renders ahead, when the sync would render at all: something asked for a rendering,
// HAProxy's configuration is known (else the sync validates), and not more than aheadTries
// times a burst.
func (r *aheadRun) start(ctx context.Context) {
	p := r.p
	if r.tries >= aheadTries || p.HAProxy().Runs == "" || p.standby() ||
		p.rendered.hash != "" && p.rendered.asked == p.asked.Load() {
		return
	}
	r.tries++
	// What the sync would accept first (a change the writer has validated since) is
	// accepted now, so that the rendering selects with the state the sync will have.
	p.acceptChecked()
	q, accepted := p.q, p.accepted
	actx, cancel := context.WithCancel(ctx)
	done := make(chan *ahead, 1)
	r.done, r.cancel = done, cancel
	go func() { done <- p.prepare(actx, q, accepted) }()
}

// result waits for the one under way, if any, and gives the last one made (nil: none). The
// quiet period is over: a change notified meanwhile (on trigger) makes the one under way
// stale, and it is cut short rather than waited for (on a busy node a rendering ahead can
// outlast the quiet period by a render or more, which the sync then spent twice). The sync
// reads after the notification and so carries its change: notes is how many it took.
func (r *aheadRun) result(trigger <-chan struct{}) (a *ahead, notes int) {
	if r == nil {
		return nil, 0
	}
	r.settle.Stop()
	r.again = false
	for r.done != nil {
		select {
		case a := <-r.done:
			r.ended(context.Background(), a)
		case <-trigger:
			notes++
			r.cutShort()
		}
	}
	return r.got, notes
}

// stop cancels what is under way and waits for it (ctx ended).
func (r *aheadRun) stop() {
	if r == nil {
		return
	}
	r.settle.Stop()
	if r.done != nil {
		r.cancel()
		<-r.done
		r.done = nil
	}
}
