package candidate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// A changed template set is rendered first apart from the syncs (a trial): its first rendering
// may run for its whole budget (a loop gone wrong), and meanwhile the syncs render with the last
// good template set, so that pods and services keep going live. Once the trial rendered, the
// syncs take the new set as any change (validated, tested, searched when it fails); when it
// failed and the template set was the only change, it is held without being rendered again.

// trial is one template set's trial rendering, for one version of the other inputs.
type trial struct {
	key    string // templates hash and the other inputs' versions (quarantine Basis)
	hash   string // the templates' hash
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
	took   time.Duration
}

func (t *trial) finished() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// tryApart selects what Make renders: with q itself, or with a copy in which the changed
// template set is tried apart (the last good set chosen meanwhile) or held, its trial having
// failed in the template. It starts the trial when the template set (or another input) changed
// since the last one.
func (b *Builder) tryApart(objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State) quarantine.Selection {
	st, sel := b.tryApartState(objs, cur, q)
	if st != q || sel == nil {
		return quarantine.Select(cur, st)
	}
	return *sel // selected with q already: Select is a pure function of cur and q
}

// tryApartState is the state to select with, and the selection it made with q when that is
// the state (nil when it made none).
func (b *Builder) tryApartState(objs *snapshot.Objects, cur snapshot.Inputs, q *quarantine.State) (*quarantine.State, *quarantine.Selection) {
	if b.cfg.Tried == nil {
		return q, nil
	}
	sel := quarantine.Select(cur, q)
	tmpl := triedApart(sel, q)
	if tmpl == nil {
		b.StopTrial()
		return q, &sel
	}
	key := tmpl.Hash + "/" + sel.Basis(snapshot.KindTemplates)
	if b.trial == nil || b.trial.key != key {
		b.startTrial(key, tmpl.Hash, objs, sel.Chosen)
	}
	t := b.trial
	if !t.finished() {
		qq := *q
		qq.Trying = map[string]string{snapshot.KindTemplates: tmpl.Hash}
		return &qq, nil
	}
	// The template is blamed here only when it is the one change: an error shown in a
	// template may come from data it reads, and with other inputs changed too the sync
	// searches which is at fault.
	var ie *snapshot.InputError
	if t.err == nil || !errors.As(t.err, &ie) || !slices.Equal(sel.Changed, []string{snapshot.KindTemplates}) {
		return q, &sel // rendered, or not the template's alone: the sync decides
	}
	qq := *q
	qq.Held = maps.Clone(q.Held)
	if qq.Held == nil {
		qq.Held = map[string]quarantine.Hold{}
	}
	maps.Copy(qq.Held, sel.Blame(map[string]error{snapshot.KindTemplates: t.err}, snapshot.StageRender, cur))
	return &qq, nil
}

// triedApart is the template set sel chooses when it is to be tried apart (it changed since
// the last good one); nil otherwise.
func triedApart(sel quarantine.Selection, q *quarantine.State) *snapshot.Input {
	tmpl := templatesOf(sel.Chosen)
	good, wasGood := q.Good[snapshot.KindTemplates]
	if tmpl == nil || !wasGood || good.Hash == tmpl.Hash {
		return nil
	}
	return tmpl
}

// startTrial renders the chosen inputs (the new template set among them) in the background,
// calling Config.Tried when done; a trial under way for other inputs is stopped. A trial
// outlives the Make that started it: the Builder owns it, and StopTrial ends it.
func (b *Builder) startTrial(key, hash string, objs *snapshot.Objects, chosen []snapshot.Input) {
	b.StopTrial()
	ctx, cancel := context.WithCancel(context.Background())
	t := &trial{key: key, hash: hash, cancel: cancel, done: make(chan struct{})}
	b.trial = t
	tried := b.cfg.Tried
	go func() {
		start := time.Now()
		snap, err := b.cfg.Inputs.Assemble(objs, chosen)
		if err != nil {
			err = inputErr(snapshot.StageDecode, err)
		} else if _, err = b.cfg.Renderer.Render(ctx, snap); err != nil {
			err = inputErr(snapshot.StageRender, err)
		}
		t.err, t.took = err, time.Since(start)
		// Finished before Tried is told: the sync Tried asks for must find the trial done, or
		// it would go on with the last good template set and nothing would ask again.
		close(t.done)
		if ctx.Err() == nil {
			tried(hash, t.took, objs.Origins.Locate(err))
		}
	}()
}

// StopTrial stops the trial under way, if any (the owner of the Builder calls it when it stops
// making candidates).
func (b *Builder) StopTrial() {
	if b.trial != nil {
		b.trial.cancel()
		b.trial = nil
	}
}
