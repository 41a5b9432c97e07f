package runtimeapi

import "context"

// tracked keeps what HAProxy runs between an Updater's calls, as the sidecar's record of
// HAProxy does (package live): the model each call returns is the one the next call gets.
type tracked struct {
	*Updater
	live *Model
}

func track(u *Updater) *tracked { return &tracked{Updater: u} }

func (t *tracked) Plan(config []byte, certs, maps map[string][]byte) *Plan {
	return t.Updater.Plan(t.live, config, certs, maps)
}

// Reloaded: HAProxy loaded p's rendering.
func (t *tracked) Reloaded(p *Plan) { t.live = p.Loaded() }

// Learn: HAProxy's version is asked, as after a reload.
func (t *tracked) Learn(ctx context.Context) { t.live = t.Updater.Learn(ctx, t.live) }

// Forget: what HAProxy runs is not known.
func (t *tracked) Forget() { t.live = nil }

func (t *tracked) Apply(ctx context.Context, p *Plan) error {
	var err error
	t.live, err = t.Updater.Apply(ctx, p, t.live)
	return err
}

func (t *tracked) Tidy(ctx context.Context) int {
	var left int
	t.live, left = t.Updater.Tidy(ctx, t.live)
	return left
}
