package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// decodeServices reads every key of the services ConfigMap as one input, decoded (through the
// cache, when given) to tell whether it is usable.
func decodeServices(cm *corev1.ConfigMap, ref Ref, cache *PodCache) []Input {
	// Room for a few certificates and the templates, which Decode appends.
	out := make([]Input, 0, len(cm.Data)+len(cm.BinaryData)+16)
	if same, ok := cache.sameEntries(ref, cm.Data, out); ok {
		out = same
	} else {
		names := cache.entryNames(cm.Data)
		lastNames, last := cache.lastEntries()
		entries := make([]decodedEntry, len(names))
		j := 0 // both sorted: the last Decode's entry of a name found by walking them
		for k, name := range names {
			keyRef := ref
			keyRef.Key = name
			for j < len(lastNames) && lastNames[j] < name {
				j++
			}
			var prev *decodedEntry
			if j < len(lastNames) && lastNames[j] == name {
				prev = &last[j]
			}
			entries[k] = cache.decodeEntry(keyRef, name, cm.Data[name], prev)
			out = append(out, entries[k].input(keyRef, name))
		}
		cache.decodedAll(ref, names, entries)
	}
	for _, name := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		keyRef := ref
		keyRef.Key = name
		out = append(out, Input{Kind: KindService, Name: name, Ref: keyRef, Hash: contentHash(string(cm.BinaryData[name])),
			Err: &InputError{Stage: StageDecode, Ref: keyRef, Err: errors.New("service entries must be in data, not binaryData")}})
	}
	return out
}

// buildServices decodes the chosen service entries (sorted by name) and attaches the ready pods
// each selects, through the pod index of the last Build (see podIndex): a service whose entry
// text and pods (the same pod records, or the same EndpointSlices) are those of the last
// Build through the same cache is the last Build's very record, found without reading its
// pods again. The records are shared between Snapshots.
func buildServices(entries []Input, ix *podIndex, eps endpointIndex) ([]*record.Record, error) {
	var (
		services []*record.Record // nil when there are none
		work     []*svcState      // the services to finish, at their place in services
		at       []int
		prev     []*builtService // the last Build's service of the same name, or nil
		errs     []error
		seen     int
	)
	if len(entries) > 0 {
		// Made at its size once: grown by appends, 10,000 services' took 0.3 MB a sync.
		services = make([]*record.Record, 0, len(entries))
	}
	for _, e := range entries {
		s := ix.services[e.Name]
		if s != nil && s.b.text == e.Text {
			s.round = ix.round
			seen++
			if s.unchanged(ix.round) {
				services = append(services, s.b.svc)
				continue
			}
			old := s.b
			s.b = &builtService{text: old.text, sel: old.sel, entry: old.entry, svc: old.svc}
			work, at, prev = append(work, s), append(at, len(services)), append(prev, old)
			services = append(services, nil)
			continue
		}
		b, err := ix.cache.startService(e, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var old *builtService
		if s != nil {
			ix.unregister(s)
			old = s.b
		} else {
			seen++ // a new name, counted as the last Build's were
		}
		clusters, _ := serviceClusters(b.entry.Get("clusters")) // checked by decodeService
		s = &svcState{b: b, ns: b.entry.Field("namespace").(string), clusters: clusters, round: ix.round, affected: ix.round}
		ix.services[e.Name] = s
		if b.sel != nil {
			ix.register(s)
		}
		work, at, prev = append(work, s), append(at, len(services)), append(prev, old)
		services = append(services, nil)
	}
	if seen != len(ix.services) {
		ix.sweepServices()
	}
	selected := make([][]*podEntry, len(work)) // nil for a service not affected: it has none
	for i, s := range work {
		if s.b.sel != nil && s.affected == ix.round {
			selected[i] = inClusters(ix.selectPods(s.ns, s.b.sel), s.clusters)
			s.nilPods = selected[i] == nil
		}
	}
	// Converting pods is most of the work: do it once per pod, in parallel.
	ix.convert(selected) // not one list of them all: 800 KB at the start of 10,000 x 10
	for i, s := range work {
		s.b.finish(prev[i], selected[i], eps)
		services[at[i]] = s.b.svc
	}
	return services, joinErrors(errs)
}

// unchanged reports whether s's record stands as it is: a selector's service none of whose pods
// changed in round (a Kubernetes Service's endpoints are compared in finish).
func (s *svcState) unchanged(round uint64) bool {
	if s.b.sel == nil || s.affected == round {
		return false
	}
	// A service with a selector and a "service" field whose selector selects nothing routes
	// to the Service's endpoints (see finish).
	_, kube := s.b.entry.Field("service").(string)
	return !s.nilPods || !kube
}

// sweepServices forgets the services this Build did not have.
func (ix *podIndex) sweepServices() {
	for name, s := range ix.services {
		if s.round != ix.round {
			ix.unregister(s)
			delete(ix.services, name)
		}
	}
}

// startService is entry e decoded: old's entry when e's text is the same, else the cache's.
func (c *PodCache) startService(e Input, old *builtService) (*builtService, *InputError) {
	if old != nil && old.text == e.Text {
		return &builtService{text: e.Text, sel: old.sel, entry: old.entry, svc: old.svc}, nil
	}
	d, err := c.decoded(e.Ref, e.Name, e.Text)
	if err != nil {
		return nil, err
	}
	return &builtService{text: e.Text, sel: d.sel, entry: d.svc}, nil
}

// finish gives b its "pods": selected, or the endpoints of the Kubernetes Service it names.
// When neither b's text nor its pods changed since old, b is old's record itself.
func (b *builtService) finish(old *builtService, selected []*podEntry, eps endpointIndex) {
	sameText := old != nil && old.text == b.text
	var oldPods *record.Record
	if old != nil {
		oldPods, _ = old.svc.Field("pods").(*record.Record)
	}
	var pods *record.Record
	if kubeSvc, ok := b.entry.Field("service").(string); ok && selected == nil {
		ns := b.entry.Field("namespace").(string)
		clusters, _ := serviceClusters(b.entry.Get("clusters")) // checked by decodeService
		b.slices = eps.slices(ns, kubeSvc, clusters)
		// Informers and the sources replace an object that changes, never change it: the
		// same slices give the same endpoints.
		if sameText && slices.Equal(old.slices, b.slices) {
			pods = oldPods
		} else {
			pods, _ = record.Of(nil, endpoints(ns, b.slices)).(*record.Record)
		}
	} else {
		pods = podsByName(selected, oldPods)
	}
	if sameText && pods == oldPods {
		b.svc = old.svc
		return
	}
	b.svc = withPods(b.entry, pods)
}

// withPods is the record of a service: its entry (serviceRecord) with pods as its "pods", the
// entry's key list shared.
func withPods(entry, pods *record.Record) *record.Record {
	r, vals := record.Make(entry.Keys())
	for i := range vals {
		vals[i] = entry.Value(i)
		if entry.Key(i) == "pods" {
			vals[i] = pods
		}
	}
	return r
}

// serviceRecord is the decoded entry name (decodeService's map, which it takes) as templates
// see it, but for its pods: with its "name" (the entry's name, whatever the entry says) and
// its "pods" (null until withPods), the maps at every depth records (as the pods' are:
// templates read a record as the map it holds), converted by conv as watched objects are: key
// lists shared, and equal parts (selectors, ports) shared between services. A record takes a
// fifth of the map's memory (issue 25).
func serviceRecord(conv *ObjectConverter, m map[string]any, name string) (*record.Record, error) {
	m["name"] = name
	m["pods"] = nil
	v, err := conv.FromPlain(m)
	if err != nil {
		return nil, fmt.Errorf("convert service %s: %w", name, err)
	}
	return v.(*record.Record), nil // a map gives a record
}

// podsByName is a service's "pods": its pods by name, as a record (iterated in name order);
// old itself when it holds the same pods by the same names.
func podsByName(pods []*podEntry, old *record.Record) *record.Record {
	slices.SortFunc(pods, func(a, b *podEntry) int { return strings.Compare(podKeyName(a), podKeyName(b)) })
	names := make([]string, 0, len(pods))
	vals := make([]any, 0, len(pods))
	for _, p := range pods {
		if n := len(names); n > 0 && names[n-1] == podKeyName(p) {
			continue // the same pod twice (a service's pods are all in one namespace)
		}
		names = append(names, podKeyName(p))
		vals = append(vals, p.object())
	}
	if samePods(old, names, vals) {
		return old
	}
	return record.New(record.TakeKeys(names), vals)
}

// samePods reports whether old holds exactly vals by names (the same records).
func samePods(old *record.Record, names []string, vals []any) bool {
	if old == nil || old.Len() != len(names) {
		return false
	}
	for i, n := range names {
		if old.Key(i) != n || old.Value(i) != vals[i] {
			return false
		}
	}
	return true
}

// decodeService decodes and checks one service entry. The returned map is the JSON object as
// written (numbers are int64 when integral, else float64), ready to get "name" and "pods".
func decodeService(ref Ref, data []byte) (map[string]any, labels.Selector, *InputError) {
	fail := func(line, col int, format string, args ...any) *InputError {
		return &InputError{Stage: StageDecode, Ref: ref, Line: line, Col: col, Err: fmt.Errorf(format, args...)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, fail(0, 0, "empty value: want a JSON object with \"namespace\" and \"selector\"")
	}
	// json.Unmarshal checks the whole input first, so syntax errors (trailing data included)
	// come with an offset; the second pass keeps integers exact.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(data, syn.Offset)
			return nil, nil, fail(line, col, "invalid JSON: %v", syn)
		}
		return nil, nil, fail(0, 0, "invalid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fail(0, 0, "invalid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fail(0, 0, "the value is a JSON %s: want a JSON object with \"namespace\" and \"selector\"", jsonType(v))
	}
	svc := convertNumbers(obj).(map[string]any)

	ns, ok := svc["namespace"]
	switch {
	case !ok:
		return nil, nil, fail(0, 0, "missing required field \"namespace\" (the namespace of the pods to route to)")
	case jsonType(ns) != "string":
		return nil, nil, fail(0, 0, "field \"namespace\" is a JSON %s: want a string", jsonType(ns))
	}
	if msgs := validation.IsDNS1123Label(ns.(string)); len(msgs) > 0 {
		return nil, nil, fail(0, 0, "field \"namespace\": %q is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))
	}

	if _, err := serviceClusters(mapGet(svc, "clusters")); err != nil {
		return nil, nil, fail(0, 0, "%v", err)
	}
	rawSel, ok := svc["selector"]
	if kubeSvc, named := svc["service"]; named && !ok {
		// The endpoints of a Kubernetes Service instead of a pod selector.
		name, isString := kubeSvc.(string)
		if !isString {
			return nil, nil, fail(0, 0, "field \"service\" is a JSON %s: want the name of a Kubernetes Service", jsonType(kubeSvc))
		}
		if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
			return nil, nil, fail(0, 0, "field \"service\": %q is not a valid Service name: %s", name, strings.Join(msgs, "; "))
		}
		return svc, nil, nil
	}
	if !ok {
		return nil, nil, fail(0, 0, "missing required field \"selector\" (the labels of the pods to route to) or \"service\" (a Kubernetes Service whose endpoints to route to)")
	}
	sel, err := parseSelector(rawSel)
	if err != nil {
		return nil, nil, fail(0, 0, "field \"selector\": %v", err)
	}
	return svc, sel, nil
}

// parseSelector accepts an object of label key -> value or a string in label selector syntax
// ("app=web,tier in (a,b)"). An empty selector selects every pod of the namespace, as in the
// original project.
func parseSelector(v any) (labels.Selector, error) {
	switch s := v.(type) {
	case string:
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("invalid label selector %q: %v", s, err)
		}
		return sel, nil
	case map[string]any:
		set := labels.Set{}
		for _, k := range slices.Sorted(maps.Keys(s)) {
			str, ok := s[k].(string)
			if !ok {
				return nil, fmt.Errorf("label %q has a JSON %s value: want a string (quote it)", k, jsonType(s[k]))
			}
			set[k] = str
		}
		sel, err := labels.ValidatedSelectorFromSet(set)
		if err != nil {
			return nil, fmt.Errorf("invalid label selector: %v", err)
		}
		return sel, nil
	default:
		return nil, fmt.Errorf("is a JSON %s: want an object of label -> value or a label selector string", jsonType(v))
	}
}

// convertNumbers replaces json.Number with int64 when the number is an integer that fits,
// float64 otherwise, so that templates compare and print numbers naturally.
func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64() // valid JSON number; out of range gives ±Inf
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
		return x
	}
	return v
}

// mapGet is m[key] with whether m has it, as one pair of arguments.
func mapGet(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	return v, ok
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, int64, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// position converts the offset of a JSON error (bytes read when it was found) into a 1-based
// line and column of the offending byte.
func position(data []byte, offset int64) (line, col int) {
	p := int(offset) - 1
	p = max(0, min(p, len(data)))
	before := data[:p]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = p - bytes.LastIndexByte(before, '\n')
	return line, col
}
