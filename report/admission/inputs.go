package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
)

// Config is what Inputs evaluates changes with.
type Config struct {
	// Objects are the objects the running sidecar sees now (its source's).
	Objects func(ctx context.Context) (*snapshot.Objects, error)
	// Good is the running sidecar's quarantine state: the version of each input it holds good.
	Good func() quarantine.State
	// Decode reads a proposed object (JSON) as the sources read one.
	Decode func(name string, data []byte) (*snapshot.Objects, error)
	// Build makes candidates as the running sidecar does, staged apart from what HAProxy
	// reads.
	Build *candidate.Builder
}

// Inputs evaluates changes of the sidecar's inputs: the objects with the change in place taken
// through a sync's steps, as the running sidecar would take them.
type Inputs struct {
	cfg Config
	// One evaluation at a time: haproxy -c of a large configuration takes a second, and the
	// reviews queue rather than run a dozen at once beside HAProxy.
	mu sync.Mutex
}

// NewInputs returns an evaluator of changes of the sidecar's inputs.
func NewInputs(cfg Config) *Inputs { return &Inputs{cfg: cfg} }

// Evaluate denies a change that would be held back (the object's input, key and line, and
// why), or that would leave nothing that renders; anything else is allowed.
func (e *Inputs) Evaluate(ctx context.Context, c Change) Verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	objs, err := e.cfg.Objects(ctx)
	if objs == nil {
		return Verdict{Allowed: true, Warnings: []string{fmt.Sprintf("haproxy-sidecar cannot read the current objects (%v): allowed unchecked", err)}}
	}
	before := objs
	if c.Operation == "DELETE" {
		var found bool
		if objs, found = objs.Delete(c.Kind, c.Namespace, c.Name); !found {
			return Verdict{Allowed: true} // not one the sidecar reads
		}
	} else {
		over, err := e.cfg.Decode(strings.ToLower(c.Kind)+".json", c.Object)
		if err != nil {
			return Verdict{Allowed: true, Warnings: []string{fmt.Sprintf("haproxy-sidecar cannot read the object (%v): allowed unchecked", err)}}
		}
		objs = objs.Overlay(objs.InHome(over))
		// A ConfigMap or Secret of the namespace that is none of the inputs (the webhook is asked
		// about them all) is allowed without a rendering.
		if len(over.Resources) == 0 && len(over.Pods)+len(over.ConvertedPods)+len(over.EndpointSlices) == 0 &&
			sameInputs(e.cfg.Build.Decode(before), e.cfg.Build.Decode(objs)) {
			return Verdict{Allowed: true}
		}
	}
	q := e.cfg.Good()
	if t, ok := q.Good[snapshot.KindTemplates]; ok {
		e.cfg.Build.AssumeTested(t.Hash) // the templates' tests run when the change is a new template set
	}
	cur := e.cfg.Build.Decode(objs)
	made := e.cfg.Build.Make(ctx, objs, cur, &q, nil, true)
	if ctx.Err() != nil {
		return Verdict{Allowed: true, Warnings: []string{"haproxy-sidecar ran out of time: allowed unchecked"}}
	}
	var reasons []string
	for _, id := range slices.Sorted(maps.Keys(made.Held)) {
		if h := made.Held[id]; isObject(h.Ref, c, objs.Home) {
			reasons = append(reasons, h.Reason())
		}
	}
	var ie *snapshot.InputError
	switch {
	case len(reasons) > 0:
		return Verdict{Reason: strings.Join(reasons, "; ")}
	case made.Err != nil && errors.As(made.Err, &ie) && isObject(ie.Ref, c, objs.Home):
		return Verdict{Reason: made.Err.Error()}
	case made.Err != nil && c.Operation == "DELETE" && isRequired(made.Err):
		return Verdict{Reason: made.Err.Error()}
	case made.Err != nil:
		return Verdict{Allowed: true, Warnings: []string{"nothing renders, with or without this change: " + made.Err.Error()}}
	}
	return Verdict{Allowed: true, Warnings: warnings(made)}
}

// maxWarnings bounds the warnings one answer carries (kubectl prints each).
const maxWarnings = 5

// warnings are what haproxy -c warned about in the rendering with the change, prefixed so that
// kubectl's reader knows who speaks.
func warnings(made candidate.Made) []string {
	if made.Candidate == nil {
		return nil
	}
	var out []string
	for i, w := range made.Candidate.Warnings {
		if i == maxWarnings {
			out = append(out, fmt.Sprintf("haproxy -c: and %d more warnings", len(made.Candidate.Warnings)-maxWarnings))
			break
		}
		out = append(out, "haproxy -c: "+w)
	}
	return out
}

// sameInputs reports whether a and b are the same operator inputs.
func sameInputs(a, b snapshot.Inputs) bool {
	if a.ServicesPresent != b.ServicesPresent || a.TemplatesPresent != b.TemplatesPresent || len(a.List) != len(b.List) {
		return false
	}
	hashes := make(map[string]string, len(a.List))
	for _, in := range a.List {
		hashes[in.ID()] = in.Hash
	}
	for _, in := range b.List {
		if h, ok := hashes[in.ID()]; !ok || h != in.Hash {
			return false
		}
	}
	return true
}

// isObject reports whether ref names the changed object (any key of it).
func isObject(ref snapshot.Ref, c Change, home string) bool {
	// With several clusters, the change is to the home cluster's object (ConfigMaps and
	// Secrets carry no cluster).
	return strings.EqualFold(ref.Kind, c.Kind) && ref.Namespace == c.Namespace && ref.Name == c.Name &&
		(ref.Cluster == "" || ref.Cluster == home)
}

// isRequired reports whether err says a required object went away (the services ConfigMap or
// the templates' object, which the running sidecar would hold rather than obey).
func isRequired(err error) bool {
	var ie *snapshot.InputError
	return errors.As(err, &ie) && ie.Stage == snapshot.StageDecode
}
