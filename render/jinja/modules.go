package jinja

import (
	"math/big"
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// What Modules does (the type is with the evaluator's state, eval.go): it keeps a module for
// the renders that share it, and hands each import its own copy of the module's values.

// Last says that the renders to come are the last to share these modules: an import then
// takes the module kept rather than a copy of it (nobody else will), and it is forgotten.
// (The Ingress example's routes at 1,000 Ingresses: 1.3 MB a rendering.)
func (s *Modules) Last() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = true
}

// get returns a copy of the module computed for key (source src) with the context vars.
func (s *Modules) get(key, src string, vars map[string]any) *module {
	s.mu.Lock()
	defer s.mu.Unlock()
	sm, ok := s.m[key]
	if !ok || sm.src != src || s.vars != identity(vars) {
		return nil
	}
	if s.last {
		delete(s.m, key)
		return sm.mod
	}
	m, _ := copyModule(sm.mod)
	return m
}

// put keeps a copy of m, computed for key (source src) with the context vars, if it can be
// copied.
func (s *Modules) put(key, src string, vars map[string]any, m *module) {
	c, ok := copyModule(m)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := identity(vars); s.vars != id {
		s.vars, s.m = id, map[string]sharedModule{}
	}
	s.m[key] = sharedModule{src: src, mod: c}
}

func identity(vars map[string]any) uintptr { return reflect.ValueOf(vars).Pointer() }

func copyModule(m *module) (*module, bool) {
	vars, ok := copyValue(m.vars)
	if !ok {
		return nil, false
	}
	return &module{name: m.name, vars: vars.(*Dict), output: m.output}, true
}

// copyValue copies what a template can change in v (its dicts, lists and namespaces); values
// nothing can change are shared. ok is false for a value it cannot copy: a macro, a
// generator or cycler with its state, a dict keyed by such a value.
func copyValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup, *tainted, *big.Int, *Undefined, *builtin, *rangeVal:
		return v, true
	case map[string]any, map[string]string, []any, []string, []map[string]any, *record.Record:
		return v, true // from the context: templates cannot change it
	case Tuple:
		out := make(Tuple, len(x))
		for i, e := range x {
			c, ok := copyValue(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case *List:
		out := &List{items: make([]any, len(x.items))}
		for i, e := range x.items {
			c, ok := copyValue(e)
			if !ok {
				return nil, false
			}
			out.items[i] = c
		}
		return out, true
	case *Dict:
		out := &Dict{keys: make([]any, len(x.keys)), vals: make([]any, len(x.vals))}
		for i, k := range x.keys {
			switch k.(type) {
			case string, Markup, int64, bool, float64, nil:
			default:
				if hk, err := keyOf(k); err != nil || hk.kind == 'p' {
					return nil, false // keyed by an object's identity
				}
			}
			c, ok := copyValue(x.vals[i])
			if !ok {
				return nil, false
			}
			out.keys[i], out.vals[i] = k, c
		}
		out.index = x.index.clone()
		return out, true
	case *Namespace:
		attrs, ok := copyValue(x.attrs)
		if !ok {
			return nil, false
		}
		return &Namespace{attrs: attrs.(*Dict)}, true
	}
	return nil, false
}
