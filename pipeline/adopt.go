package pipeline

import (
	"context"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// adopt leaves HAProxy alone at start when it runs what the rendering asks for already: the
// live generation is this rendering and HAProxy's load is the one recorded when it was made
// live (by an earlier run of the sidecar). Without this, restarting the sidecar would reload
// HAProxy. When that cannot be shown, what HAProxy runs stays unknown and the sync goes on as
// usual (a reload).
func (p *Pipeline) adopt(ctx context.Context, bundle *render.Bundle) {
	li, canTell := p.cfg.Reloader.(loadIdentifier)
	live := p.cfg.Store.Live()
	rec, recorded := p.cfg.Store.Loaded()
	if !canTell || !recorded || live == nil || live.Hash != bundle.Hash || rec.Hash != bundle.Hash {
		return
	}
	id, err := li.LoadID(ctx)
	if err != nil || id != rec.LoadID {
		p.log.Info("HAProxy may not run the live configuration: it will be reloaded",
			"recorded_load", rec.LoadID, "load", id, "error", err)
		return
	}
	p.setLoad(bundle.Hash, id, false)
	p.probedLoad.Store(id)
	if p.cfg.Runtime != nil {
		plan, _ := p.planRuntime(bundle)
		p.cfg.Runtime.Reloaded(plan)
	}
	p.cfg.Store.MarkGood(live)
	p.setGood(bundle)
	p.setRuns(bundle.Hash)
	p.cfg.Metrics.ConfigValid.Set(1)
	p.log.Info("HAProxy already runs this configuration: no reload", "hash", short(bundle.Hash), "load", id)
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
	if id != "" {
		p.probedLoad.Store(id)
	}
	p.setLoad(hash, id, true)
}

// setLoad records that HAProxy runs the rendering hash under load id ("": not known), and
// writes the record when store is set.
func (p *Pipeline) setLoad(hash, id string, store bool) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.loadID, p.recordHash = id, hash
	if id == "" {
		p.recordHash = ""
	}
	if store {
		p.storeLoadedLocked()
	}
}

// currentLoad is the load of HAProxy the sidecar made or adopted ("" not known).
func (p *Pipeline) currentLoad() string {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	return p.loadID
}

// changingRuntime is called before the runtime API changes what HAProxy runs: until the
// change is written (writtenLive), no rendering is what HAProxy runs for sure.
func (p *Pipeline) changingRuntime() {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.recordHash = ""
	p.storeLoadedLocked()
}

// ranRuntime is called once the runtime API made the rendering hash live (the load is the
// same: runtime changes do not reload).
func (p *Pipeline) ranRuntime(hash string) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if p.loadID != "" {
		p.recordHash = hash
	}
}

// writtenLive is called once a rendering HAProxy got through the runtime API is live on
// disk: recorded if HAProxy still runs it (no newer runtime change since).
func (p *Pipeline) writtenLive(hash string) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if p.recordHash == hash {
		p.storeLoadedLocked()
	}
}

// storeLoadedLocked writes the record of what HAProxy runs (none when it is not known).
func (p *Pipeline) storeLoadedLocked() {
	l := generation.Loaded{Hash: p.recordHash, LoadID: p.loadID}
	if p.recordHash == "" || p.loadID == "" {
		l = generation.Loaded{}
	}
	if err := p.cfg.Store.SetLoaded(l); err != nil {
		p.log.Warn("record what HAProxy runs", "error", err)
	}
}
