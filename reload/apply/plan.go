package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// Runtime changes a running HAProxy through its runtime API where the change allows it, so
// that no reload is needed (see package runtimeapi). It keeps no state: what HAProxy runs as
// the runtime API sees it is the Model in the record of HAProxy (package live).
type Runtime interface {
	// Plan compares a rendering (configuration, certificates, map files) with what HAProxy
	// runs (m; nil: not known).
	Plan(m *runtimeapi.Model, config []byte, certs, maps map[string][]byte) *runtimeapi.Plan
	// Apply makes the plan's runtime changes to what HAProxy runs (current) and returns what
	// it runs then; on error what HAProxy runs is not known.
	Apply(ctx context.Context, p *runtimeapi.Plan, current *runtimeapi.Model) (*runtimeapi.Model, error)
	// Tidy deletes the removed servers HAProxy kept because they still had connections (and
	// the removed backends they kept); it returns what HAProxy runs then, and how many are left.
	Tidy(ctx context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int)
	// Learn returns m, what HAProxy runs once it loaded a configuration, with what the runtime
	// API can tell of that HAProxy (its version: whether it adds backends at runtime).
	Learn(ctx context.Context, m *runtimeapi.Model) *runtimeapi.Model
}

// reloadsOnly is the Runtime when there is no runtime API: every change reloads.
type reloadsOnly struct{}

func (reloadsOnly) Plan(*runtimeapi.Model, []byte, map[string][]byte, map[string][]byte) *runtimeapi.Plan {
	return runtimeapi.ReloadPlan("every change reloads (no runtime API)")
}

func (reloadsOnly) Apply(context.Context, *runtimeapi.Plan, *runtimeapi.Model) (*runtimeapi.Model, error) {
	return nil, errors.New("no runtime API")
}

func (reloadsOnly) Tidy(_ context.Context, m *runtimeapi.Model) (*runtimeapi.Model, int) { return m, 0 }

func (reloadsOnly) Learn(_ context.Context, m *runtimeapi.Model) *runtimeapi.Model { return m }

// Plan compares the rendering with what HAProxy runs: why is "" when the runtime API can make
// the whole change, else why a reload is needed.
func (a *Applier) Plan(b *render.Bundle) (plan *runtimeapi.Plan, why string) {
	return PlanFor(a.cfg.Runtime, a.cfg.HAProxy.State(), b)
}

// PlanFor compares the rendering b with what HAProxy runs as s says, through rt (nil: no
// runtime API): why is "" when the runtime API can make the whole change, else why a reload
// is needed. It changes nothing.
func PlanFor(rt Runtime, s live.State, b *render.Bundle) (plan *runtimeapi.Plan, why string) {
	if rt == nil {
		rt = reloadsOnly{}
	}
	plan = rt.Plan(s.Model, b.Config, b.Certificates, b.Maps)
	if why := plan.Reload(); why != "" {
		return plan, why
	}
	// The contents of map files change through the runtime API (the plan); other files, and
	// map files added or removed, only through a reload: those of the last good rendering are
	// the ones HAProxy loaded.
	return plan, auxChanged(s.Good.Bundle, b)
}

// Loaded is what the runtime API sees of HAProxy once it loaded b (nil without a runtime API),
// HAProxy's version included when it answers.
func (a *Applier) Loaded(ctx context.Context, b *render.Bundle) *runtimeapi.Model {
	return a.cfg.Runtime.Learn(ctx, a.cfg.Runtime.Plan(nil, b.Config, b.Certificates, b.Maps).Loaded())
}

// Tidy deletes again the removed servers that still had connections.
func (a *Applier) Tidy(ctx context.Context) {
	m, left := a.cfg.Runtime.Tidy(ctx, a.cfg.HAProxy.State().Model)
	a.cfg.HAProxy.Record(live.RuntimeTidied{Model: m})
	if left > 0 {
		a.log.Debug("removed servers still holding connections, in maintenance", "servers", left)
	}
}

// auxChanged says which files of the rendering b differ from those of the rendering HAProxy
// loaded in a way only a reload makes live: other files added, removed or changed, map files
// added or removed ("" when none, or when what HAProxy loaded is not known: nil).
func auxChanged(loaded, b *render.Bundle) string {
	if loaded == nil {
		return ""
	}
	var changed []string
	for _, set := range []struct {
		what      string
		was, want map[string][]byte
		contents  bool // a change of contents needs a reload
	}{{"map file", loaded.Maps, b.Maps, false}, {"file", loaded.Files, b.Files, true}} {
		for _, name := range slices.Sorted(maps.Keys(set.want)) {
			if was, ok := set.was[name]; !ok {
				changed = append(changed, set.what+" "+name+" added")
			} else if set.contents && !bytes.Equal(was, set.want[name]) {
				changed = append(changed, set.what+" "+name+" changed")
			}
		}
		for _, name := range slices.Sorted(maps.Keys(set.was)) {
			if _, ok := set.want[name]; !ok {
				changed = append(changed, set.what+" "+name+" removed")
			}
		}
	}
	if len(changed) == 0 {
		return ""
	}
	if len(changed) > 3 {
		changed = append(changed[:3], fmt.Sprintf("and %d more", len(changed)-3))
	}
	return strings.Join(changed, ", ") + " (files other than map contents change through a reload)"
}
