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
	out := make([]Input, 0, len(cm.Data)+len(cm.BinaryData))
	next := make(map[serviceKey]decodedService, len(cm.Data))
	for _, name := range slices.Sorted(maps.Keys(cm.Data)) {
		keyRef := ref
		keyRef.Key = name
		text := cm.Data[name]
		in := Input{Kind: KindService, Name: name, Ref: keyRef, Text: text, Hash: contentHash(text)}
		if _, _, err := cache.service(keyRef, name, text, next); err != nil {
			in.Err = err
		}
		out = append(out, in)
	}
	cache.replaceServices(next)
	for _, name := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		keyRef := ref
		keyRef.Key = name
		out = append(out, Input{Kind: KindService, Name: name, Ref: keyRef, Hash: contentHash(string(cm.BinaryData[name])),
			Err: &InputError{Stage: StageDecode, Ref: keyRef, Err: errors.New("service entries must be in data, not binaryData")}})
	}
	return out
}

// buildServices decodes the chosen service entries (sorted by name) and attaches the ready pods
// each selects.
func buildServices(entries []Input, pods *podIndex, eps endpointIndex) ([]map[string]any, error) {
	var (
		services []map[string]any
		selected [][]*podEntry
		errs     []error
	)
	for _, e := range entries {
		svc, sel, err := pods.cache.service(e.Ref, e.Name, e.Text, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		svc["name"] = e.Name
		services = append(services, svc)
		if sel == nil {
			selected = append(selected, nil) // endpoints of a Kubernetes Service, filled below
			continue
		}
		clusters, _ := serviceClusters(svc) // checked by decodeService
		selected = append(selected, inClusters(pods.selectPods(svc["namespace"].(string), sel), clusters))
	}
	// Converting pods is most of the work: do it once per pod, in parallel.
	pods.convert(slices.Concat(selected...))
	for i, svc := range services {
		if kubeSvc, ok := svc["service"].(string); ok && selected[i] == nil {
			clusters, _ := serviceClusters(svc) // checked by decodeService
			svc["pods"] = record.Of(nil, eps.endpoints(svc["namespace"].(string), kubeSvc, clusters))
			continue
		}
		svc["pods"] = podsByName(selected[i])
	}
	return services, joinErrors(errs)
}

// podsByName is a service's "pods": its pods by name, as a record (iterated in name order).
func podsByName(pods []*podEntry) *record.Record {
	slices.SortFunc(pods, func(a, b *podEntry) int { return strings.Compare(podKeyName(a), podKeyName(b)) })
	names := make([]string, 0, len(pods))
	vals := make([]any, 0, len(pods))
	for _, p := range pods {
		if n := len(names); n > 0 && names[n-1] == podKeyName(p) {
			continue // the same pod twice (a service's pods are all in one namespace)
		}
		names = append(names, podKeyName(p))
		vals = append(vals, p.obj)
	}
	return record.New(record.NewKeys(names...), vals)
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

	if _, err := serviceClusters(svc); err != nil {
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
