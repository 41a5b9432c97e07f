package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
)

// UnsafeValueError is a value from the data (a service entry, a pod, a watched object, an
// environment variable) holding a newline, a carriage return or a NUL, printed into haproxy.cfg without
// |safe: it would add lines the template does not have. Render returns it inside a
// *snapshot.InputError whose Ref is Origin, so that the input at fault can be held back.
type UnsafeValueError struct {
	Origin   snapshot.Ref // the object (and key) the value came from; zero if not found
	Field    string       // where in it: hostnames[0], metadata.annotations.x, env.NAME
	Value    string       // the value, as printed
	Secret   bool         // Value is derived from a secret value: not quoted
	Template snapshot.Ref // the template key it was printed from
	Line     int
	Col      int
}

func (e *UnsafeValueError) Error() string {
	what := "a value from the data"
	if e.Field != "" {
		what = "field " + e.Field
	}
	value := short(e.Value)
	if e.Secret {
		value = "derived from a secret value, not shown"
	}
	return fmt.Sprintf("%s holds %s (%s), which would start a new line in haproxy.cfg: printed at %s line %d column %d (the template can mark it |safe if that is intended)",
		what, forbiddenName(e.Value), value, e.Template, e.Line, e.Col)
}

func forbiddenName(s string) string {
	switch {
	case strings.Contains(s, "\n"):
		return "a newline"
	case strings.Contains(s, "\r"):
		return "a carriage return"
	}
	return "a NUL character"
}

func short(s string) string {
	q := strconv.Quote(s)
	if len(q) > 60 {
		q = q[:57] + "..."
	}
	return q
}

// unsafeValue finds where the offending value came from (a search of the snapshot, done only
// when this error happens) and returns the InputError that names it.
func unsafeValue(s *snapshot.Snapshot, uv *jinja.UnsafeValueError, tmpl snapshot.Ref, line, col int) error {
	e := &UnsafeValueError{Value: uv.Value, Secret: uv.Secret, Template: tmpl, Line: line, Col: col}
	e.Origin, e.Field = origin(s, uv.Source)
	ref := e.Origin
	if ref == (snapshot.Ref{}) {
		ref = tmpl // not found in the data: report it against the template
	}
	return &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref, Err: e}
}

// origin searches the snapshot for the data string src.
func origin(s *snapshot.Snapshot, src string) (snapshot.Ref, string) {
	for _, svc := range s.Services {
		name, _ := svc.Field("name").(string)
		ns, _ := svc.Field("namespace").(string)
		for k, v := range svc.All() {
			if k == "pods" {
				continue
			}
			if path, ok := find(v, src, k); ok {
				ref := s.ServicesRef
				ref.Key = name
				return ref, path
			}
		}
		var found snapshot.Ref
		var field string
		eachPod(svc.Field("pods"), func(podName string, pod any) bool {
			if podName == src {
				found, field = podRef(ns, podName, pod), "metadata.name"
				return false
			}
			if path, ok := find(pod, src, ""); ok {
				found, field = podRef(ns, podName, pod), path
				return false
			}
			return true
		})
		if field != "" {
			return found, field
		}
	}
	if ref, field, ok := resourceOrigin(s.Resources, src); ok {
		return ref, field
	}
	for _, k := range sortedStrKeys(s.Env) {
		if s.Env[k] == src {
			return snapshot.Ref{Kind: "Env", Name: k}, "env." + k
		}
	}
	if s.Stats.Password == src {
		return snapshot.Ref{Kind: "Env", Name: "STATISTICS_PASSWORD"}, "stats.password"
	}
	return snapshot.Ref{}, ""
}

// resourceOrigin searches the watched objects for src: a value or a key inside an object, or a
// key of a lookup (by_name, by_<index>), which names the first object it gives.
func resourceOrigin(resources []snapshot.Resource, src string) (snapshot.Ref, string, bool) {
	for _, res := range resources {
		for _, o := range res.Objects {
			if path, ok := find(o.Record(), src, ""); ok {
				return o.Ref(), path, true
			}
		}
		for i := range res.Value.Len() {
			lookup, ok := res.Value.Value(i).(*record.Record)
			if !ok {
				continue
			}
			if v, ok := lookup.Get(src); ok {
				obj := v
				if l, isList := v.([]any); isList && len(l) > 0 {
					obj = l[0]
				}
				for _, o := range res.Objects {
					if o.Record() == obj {
						return o.Ref(), "resources." + res.Name + "." + res.Value.Key(i) + " key", true
					}
				}
			}
		}
	}
	return snapshot.Ref{}, "", false
}

func podRef(ns, name string, pod any) snapshot.Ref {
	kind := "Pod"
	if _, ok := lookup(pod, "endpoint"); ok {
		kind = "EndpointSlice endpoint" // a service backed by a Kubernetes Service's endpoints
	}
	return snapshot.Ref{Kind: kind, Namespace: ns, Name: name}
}

func eachPod(pods any, fn func(string, any) bool) {
	switch p := pods.(type) {
	case *record.Record:
		for i := range p.Len() {
			if !fn(p.Key(i), p.Value(i)) {
				return
			}
		}
	case map[string]any:
		for _, k := range sortedMapKeys(p) {
			if !fn(k, p[k]) {
				return
			}
		}
	}
}

func lookup(v any, key string) (any, bool) {
	switch m := v.(type) {
	case *record.Record:
		return m.Get(key)
	case map[string]any:
		x, ok := m[key]
		return x, ok
	}
	return nil, false
}

// find returns the path of src inside v (a JSON-like value), prefixed by path.
func find(v any, src, path string) (string, bool) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case string:
		return path, x == src
	case []any:
		for i, e := range x {
			if p, ok := find(e, src, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	case map[string]any:
		for _, k := range sortedMapKeys(x) {
			if k == src {
				return join(k), true
			}
			if p, ok := find(x[k], src, join(k)); ok {
				return p, true
			}
		}
	case *record.Record:
		for i := range x.Len() {
			if x.Key(i) == src {
				return join(x.Key(i)), true
			}
			if p, ok := find(x.Value(i), src, join(x.Key(i))); ok {
				return p, true
			}
		}
	}
	return "", false
}

func sortedMapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedStrKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
