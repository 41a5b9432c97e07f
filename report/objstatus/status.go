package objstatus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// The annotations of the services ConfigMap: the live rendering's hash, and since when it is
// live (RFC 3339).
const (
	AnnotationLiveConfig = "haproxy-sidecar.io/live-config"
	AnnotationLiveSince  = "haproxy-sidecar.io/live-since"
)

// gatewayGroup is the Gateway API's group: a parentRef's default.
const gatewayGroup = "gateway.networking.k8s.io"

// maxParents bounds a route's status.parents (the Gateway API's maxItems).
const maxParents = 32

// Confirmed is the rendering whose status may be written now: the last good rendering, when it
// is the one confirmed live (live.State.Live: HAProxy runs it), this instance is not a standby
// (standby: --leader-elect and not leading), and every remote host has it (hostsHave, with
// --reload=dataplane; nil otherwise). Otherwise nil, and why not.
func Confirmed(st live.State, standby bool, hostsHave func(hash string) bool) (*render.Bundle, string) {
	switch {
	case standby:
		return nil, "not the leader"
	case st.Live == "":
		return nil, "no configuration is confirmed live"
	case st.Good.Bundle == nil || st.Good.Bundle.Hash != st.Live:
		// Made live through the runtime API, its files not written yet (live.FilesWritten).
		return nil, "the live configuration's files are not written yet"
	case hostsHave != nil && !hostsHave(st.Live):
		return nil, "not every Data Plane API host has the live configuration yet"
	}
	return st.Good.Bundle, ""
}

// IngressStatus is an Ingress's status.loadBalancer once it publishes addrs, and whether that
// changes cur.
func IngressStatus(cur networkingv1.IngressLoadBalancerStatus, addrs []Address) (networkingv1.IngressLoadBalancerStatus, bool) {
	var want networkingv1.IngressLoadBalancerStatus
	for _, a := range addrs {
		want.Ingress = append(want.Ingress, networkingv1.IngressLoadBalancerIngress{IP: a.IP, Hostname: a.Hostname})
	}
	return want, !equality.Semantic.DeepEqual(cur, want)
}

// IngressForget is the status.loadBalancer of an Ingress no longer served: emptied when it is
// what the sidecar publishes (addrs), else left as another controller may have written it.
func IngressForget(cur networkingv1.IngressLoadBalancerStatus, addrs []Address) (networkingv1.IngressLoadBalancerStatus, bool) {
	if _, changed := IngressStatus(cur, addrs); changed || len(cur.Ingress) == 0 {
		return cur, false
	}
	return networkingv1.IngressLoadBalancerStatus{}, true
}

// GatewayStatus is a Gateway's status (as the API serves it, unstructured; nil: none) once it
// has what is wanted of it (its conditions, with observedGeneration generation, and its
// listeners when declared) and, when publishing, the addresses addrs (the declared ones, when
// want has some, whether publishing or not); whether that changes it. Conditions of other
// types are left as they are. Publishing with no address (a load balancer not made yet) makes
// Programmed false (AddressNotAssigned).
func GatewayStatus(status map[string]any, generation int64, want Want, publishing bool, addrs []Address, now time.Time) (map[string]any, bool) {
	st := map[string]any{}
	if status != nil {
		st = runtime.DeepCopyJSON(status)
	}
	conds := want.Conditions
	if len(want.Addresses) > 0 {
		publishing, addrs = true, want.Addresses
	}
	if publishing && len(addrs) == 0 {
		conds = append([]Condition(nil), conds...)
		for i, c := range conds {
			if c.Type == Programmed && c.True {
				conds[i] = Condition{Type: Programmed, Reason: "AddressNotAssigned", Message: "the published Service has no address yet"}
			}
		}
	}
	old, _ := st["conditions"].([]any)
	st["conditions"] = setConditions(old, conds, generation, now, true)
	if publishing {
		var list []any
		for _, a := range addrs {
			if a.IP != "" {
				list = append(list, map[string]any{"type": "IPAddress", "value": a.IP})
			} else {
				list = append(list, map[string]any{"type": "Hostname", "value": a.Hostname})
			}
		}
		if len(list) > 0 {
			st["addresses"] = list
		} else {
			delete(st, "addresses")
		}
	}
	if len(want.Listeners) > 0 {
		old, _ := st["listeners"].([]any)
		st["listeners"] = listenerStatuses(old, want.Listeners, generation, now)
	}
	return st, !equality.Semantic.DeepEqual(status, st) && !(status == nil && len(st) == 0)
}

// listenerStatuses is a Gateway's status.listeners (unstructured) once it is the listeners
// wanted, in their order; a listener's conditions keep their lastTransitionTime from old
// while their status stays.
func listenerStatuses(old []any, want []ListenerWant, generation int64, now time.Time) []any {
	oldConds := map[string][]any{}
	for _, o := range old {
		m, _ := o.(map[string]any)
		name, _ := m["name"].(string)
		if c, ok := m["conditions"].([]any); ok && oldConds[name] == nil {
			oldConds[name] = c
		}
	}
	out := []any{}
	for _, l := range want {
		kinds := []any{}
		for _, k := range l.Kinds {
			kinds = append(kinds, map[string]any{"group": k.Group, "kind": k.Kind})
		}
		out = append(out, map[string]any{
			"name":           l.Name,
			"supportedKinds": kinds,
			"attachedRoutes": int64(l.Attached),
			"conditions":     setConditions(oldConds[l.Name], l.Conditions, generation, now, false),
		})
	}
	return out
}

// GatewayClassStatus is a GatewayClass's status (unstructured; nil: none) once it has the
// conditions declared (with observedGeneration generation), and whether that changes it. The
// rest (conditions of other types, supportedFeatures) is left as it is.
func GatewayClassStatus(status map[string]any, generation int64, conds []Condition, now time.Time) (map[string]any, bool) {
	st := map[string]any{}
	if status != nil {
		st = runtime.DeepCopyJSON(status)
	}
	old, _ := st["conditions"].([]any)
	st["conditions"] = setConditions(old, conds, generation, now, true)
	return st, !equality.Semantic.DeepEqual(status, st)
}

// RouteParents is a route's status.parents (as the API serves it, unstructured) once the
// controller's entries are the parents wanted: each with the route's parentRef as its spec
// writes it (spec.parentRefs of a route of namespace routeNS) and its conditions (with
// observedGeneration generation). Entries of other controllers stay as they are, where they
// are; the controller's entries for parents no longer wanted go. A wanted parent that no
// parentRef of the spec names is left out, with a problem. It says whether that changes
// parents.
func RouteParents(parents, specRefs []any, routeNS, controller string, want []ParentWant, generation int64, now time.Time) ([]any, bool, []error) {
	spec := map[string]map[string]any{}
	for _, r := range specRefs {
		if m, ok := r.(map[string]any); ok {
			if k := refKey(m, routeNS); spec[k] == nil {
				spec[k] = m
			}
		}
	}
	wanted := map[string]int{}
	for i, w := range want {
		wanted[parentKey(w.Parent)] = i
	}
	used := map[string]bool{}
	out := []any{}
	for _, e := range parents {
		m, ok := e.(map[string]any)
		if !ok || m["controllerName"] != controller {
			out = append(out, e)
			continue
		}
		ref, _ := m["parentRef"].(map[string]any)
		k := refKey(ref, routeNS)
		i, ok := wanted[k]
		if !ok || used[k] || spec[k] == nil {
			continue // no longer served through this parent
		}
		used[k] = true
		old, _ := m["conditions"].([]any)
		out = append(out, parentEntry(spec[k], controller, setConditions(old, want[i].Conditions, generation, now, false)))
	}
	var problems []error
	for _, w := range want {
		k := parentKey(w.Parent)
		switch {
		case used[k]:
		case spec[k] == nil:
			problems = append(problems, fmt.Errorf("no parentRef of the route's spec names %s", w.Parent))
		case len(out) >= maxParents:
			problems = append(problems, fmt.Errorf("parent %s left out: status.parents holds at most %d", w.Parent, maxParents))
		default:
			used[k] = true
			out = append(out, parentEntry(spec[k], controller, setConditions(nil, w.Conditions, generation, now, false)))
		}
	}
	return out, !equality.Semantic.DeepEqual(parents, out) && !(len(parents) == 0 && len(out) == 0), problems
}

func parentEntry(ref map[string]any, controller string, conds []any) map[string]any {
	return map[string]any{"parentRef": runtime.DeepCopyJSON(ref), "controllerName": controller, "conditions": conds}
}

// refKey identifies a parentRef (unstructured) of a route of namespace routeNS, its defaults
// filled in.
func refKey(ref map[string]any, routeNS string) string {
	str := func(k, def string) string {
		if s, _ := ref[k].(string); s != "" {
			return s
		}
		return def
	}
	port := int64(0)
	switch p := ref["port"].(type) {
	case int64:
		port = p
	case float64:
		port = int64(p)
	}
	return key(str("group", gatewayGroup), str("kind", KindGateway), str("namespace", routeNS), str("name", ""), str("sectionName", ""), port)
}

// parentKey identifies a declared parent, as refKey does.
func parentKey(p Parent) string {
	return key(gatewayGroup, KindGateway, p.Namespace, p.Name, p.Section, int64(p.Port))
}

func key(group, kind, ns, name, section string, port int64) string {
	return group + "/" + kind + "/" + ns + "/" + name + "/" + section + "/" + strconv.FormatInt(port, 10)
}

// setConditions is a list of conditions (unstructured) once it has want, each with
// observedGeneration generation (0: left out); a condition keeps its lastTransitionTime while
// its status stays, else gets now. keepOthers keeps the conditions of other types, where they
// are; otherwise the list is want only.
func setConditions(old []any, want []Condition, generation int64, now time.Time, keepOthers bool) []any {
	byType := map[string]int{}
	for i, c := range want {
		byType[c.Type] = i
	}
	out := []any{}
	done := map[string]bool{}
	for _, o := range old {
		m, _ := o.(map[string]any)
		typ, _ := m["type"].(string)
		if i, ok := byType[typ]; ok && !done[typ] {
			out = append(out, conditionMap(want[i], generation, m, now))
			done[typ] = true
			continue
		}
		if keepOthers {
			out = append(out, o)
		}
	}
	for _, c := range want {
		if !done[c.Type] {
			out = append(out, conditionMap(c, generation, nil, now))
		}
	}
	return out
}

func conditionMap(c Condition, generation int64, old map[string]any, now time.Time) map[string]any {
	status := "False"
	if c.True {
		status = "True"
	}
	m := map[string]any{"type": c.Type, "status": status, "reason": c.Reason, "message": c.Message,
		"lastTransitionTime": now.UTC().Format(time.RFC3339)}
	if old != nil && old["status"] == status {
		if t, ok := old["lastTransitionTime"].(string); ok && t != "" {
			m["lastTransitionTime"] = t
		}
	}
	if generation > 0 {
		m["observedGeneration"] = generation
	}
	return m
}

// LiveAnnotations is the merge patch that gives the services ConfigMap (whose annotations are
// cur) the live rendering's hash and since when it is live, and whether it changes anything.
func LiveAnnotations(cur map[string]string, hash string, since time.Time) ([]byte, bool) {
	want := map[string]string{AnnotationLiveConfig: hash, AnnotationLiveSince: since.UTC().Format(time.RFC3339)}
	if cur[AnnotationLiveConfig] == want[AnnotationLiveConfig] && cur[AnnotationLiveSince] == want[AnnotationLiveSince] {
		return nil, false
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	return patch, true
}
