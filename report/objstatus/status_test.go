package objstatus

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

var (
	t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

const (
	ts0 = "2026-11-27T12:00:00Z"
	ts1 = "2026-11-27T12:01:00Z"
)

// TestConfirmed: the status of a rendering is written once HAProxy confirmed it live, its
// files written, by the leader, and once every remote host has it.
func TestConfirmed(t *testing.T) {
	a, b := &render.Bundle{Hash: "a"}, &render.Bundle{Hash: "b"}
	running := live.State{Runs: "a", Live: "a", Good: live.Good{Bundle: a}}
	all := func(string) bool { return true }
	none := func(string) bool { return false }
	tests := []struct {
		name      string
		st        live.State
		standby   bool
		hostsHave func(string) bool
		want      *render.Bundle
		why       string
	}{
		{"live", running, false, nil, a, ""},
		{"nothing live yet", live.State{}, false, nil, nil, "no configuration is confirmed live"},
		{"written while HAProxy is down: not live", live.State{LoadsAtStart: "b", Good: live.Good{Bundle: b}}, false, nil, nil, "no configuration is confirmed live"},
		{"made live through the runtime API, its files not written yet", live.State{Runs: "b", Live: "b", Good: live.Good{Bundle: a}}, false, nil, nil, "files are not written yet"},
		{"the last confirmed stays while what runs is briefly not known", live.State{Live: "a", Good: live.Good{Bundle: a}}, false, nil, a, ""},
		{"a standby", running, true, nil, nil, "not the leader"},
		{"every host has it", running, false, all, a, ""},
		{"a host does not have it yet", running, false, none, nil, "not every Data Plane API host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Confirmed(tc.st, tc.standby, tc.hostsHave)
			if got != tc.want || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("Confirmed = %v, %q; want %v, %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func lb(addrs ...networkingv1.IngressLoadBalancerIngress) networkingv1.IngressLoadBalancerStatus {
	return networkingv1.IngressLoadBalancerStatus{Ingress: addrs}
}

// TestIngressStatus: the published addresses, written when they differ; taken back from an
// Ingress no longer served only when they are the sidecar's.
func TestIngressStatus(t *testing.T) {
	ip := networkingv1.IngressLoadBalancerIngress{IP: "203.0.113.7"}
	host := networkingv1.IngressLoadBalancerIngress{Hostname: "lb.example.com"}
	other := networkingv1.IngressLoadBalancerIngress{IP: "198.51.100.1"}
	addrs := []Address{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}
	tests := []struct {
		name        string
		cur         networkingv1.IngressLoadBalancerStatus
		addrs       []Address
		want        networkingv1.IngressLoadBalancerStatus
		changed     bool
		forget      networkingv1.IngressLoadBalancerStatus
		forgetWrite bool
	}{
		{"none yet", lb(), addrs, lb(ip, host), true, lb(), false},
		{"already there: nothing written", lb(ip, host), addrs, lb(ip, host), false, lb(), true},
		{"another address: replaced; not taken back", lb(other), addrs, lb(ip, host), true, lb(other), false},
		{"no address to publish (yet): emptied", lb(ip), nil, lb(), true, lb(ip), false},
		{"nothing, nothing to publish", lb(), nil, lb(), false, lb(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := IngressStatus(tc.cur, tc.addrs)
			if changed != tc.changed || !reflect.DeepEqual(got.Ingress, tc.want.Ingress) && len(got.Ingress)+len(tc.want.Ingress) > 0 {
				t.Errorf("IngressStatus = %+v, %v; want %+v, %v", got, changed, tc.want, tc.changed)
			}
			got, changed = IngressForget(tc.cur, tc.addrs)
			if changed != tc.forgetWrite || !reflect.DeepEqual(got.Ingress, tc.forget.Ingress) && len(got.Ingress)+len(tc.forget.Ingress) > 0 {
				t.Errorf("IngressForget = %+v, %v; want %+v, %v", got, changed, tc.forget, tc.forgetWrite)
			}
		})
	}
}

// TestServiceAddresses: a load balancer's addresses, else the external IPs.
func TestServiceAddresses(t *testing.T) {
	svc := &corev1.Service{}
	if got := ServiceAddresses(svc); len(got) != 0 {
		t.Errorf("no address yet: %v", got)
	}
	svc.Spec.ExternalIPs = []string{"198.51.100.1"}
	if got := ServiceAddresses(svc); !reflect.DeepEqual(got, []Address{{IP: "198.51.100.1"}}) {
		t.Errorf("external IPs: %v", got)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}
	if got := ServiceAddresses(svc); !reflect.DeepEqual(got, []Address{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}) {
		t.Errorf("a load balancer: %v", got)
	}
	if got := Addresses([]string{"2001:db8::1", "lb.example.com"}); !reflect.DeepEqual(got, []Address{{IP: "2001:db8::1"}, {Hostname: "lb.example.com"}}) {
		t.Errorf("Addresses = %v", got)
	}
}

// obj reads JSON (test fixtures as the API serves them: numbers are int64).
func obj[T any](t *testing.T, js string) T {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	return int64s(v).(T)
}

// checkStatus fails t unless got and changed are what want (JSON) and wantChanged say.
func checkStatus[T any](t *testing.T, what string, got T, changed bool, want string, wantChanged bool) {
	t.Helper()
	w := obj[T](t, want)
	if changed != wantChanged || !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		wj, _ := json.Marshal(w)
		t.Errorf("%s = %s, %v\nwant %s, %v", what, g, changed, wj, wantChanged)
	}
}

func int64s(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = int64s(e)
		}
	case []any:
		for i, e := range x {
			x[i] = int64s(e)
		}
	case json.Number:
		n, _ := x.Int64()
		return n
	}
	return v
}

// TestGatewayStatus: Accepted and Programmed with observedGeneration, lastTransitionTime kept
// while a condition's status stays, other conditions left alone, the published addresses.
func TestGatewayStatus(t *testing.T) {
	pending := `{"conditions":[
		{"type":"Accepted","status":"Unknown","reason":"Pending","message":"Waiting for controller","lastTransitionTime":"1970-01-01T00:00:00Z"},
		{"type":"Programmed","status":"Unknown","reason":"Pending","message":"Waiting for controller","lastTransitionTime":"1970-01-01T00:00:00Z"}]}`
	written := `{"conditions":[
		{"type":"Accepted","status":"True","reason":"Accepted","message":"Accepted by HAProxy","observedGeneration":2,"lastTransitionTime":"` + ts0 + `"},
		{"type":"Programmed","status":"True","reason":"Programmed","message":"HAProxy runs a configuration that serves it","observedGeneration":2,"lastTransitionTime":"` + ts0 + `"}]}`
	fresh := strings.ReplaceAll(written, ts0, ts1) // written now (t1)
	both := []Condition{accepted(), programmed()}
	addrs := []Address{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}
	tests := []struct {
		name       string
		status     string // "": none
		gen        int64
		conds      []Condition
		publishing bool
		addrs      []Address
		want       string
		changed    bool
	}{
		{"from the CRD's default (Pending)", pending, 2, both, false, nil, fresh, true},
		{"no status at all", "", 2, both, false, nil, fresh, true},
		{"already so: nothing written", written, 2, both, false, nil, written, false},
		{"a new generation: observedGeneration, the transition time kept", written, 3, both, false, nil,
			strings.ReplaceAll(written, `"observedGeneration":2`, `"observedGeneration":3`), true},
		{"not programmed any more: a new transition time", written, 2, []Condition{accepted(), {Type: Programmed, Reason: "Invalid", Message: "bad"}}, false, nil,
			`{"conditions":[
				{"type":"Accepted","status":"True","reason":"Accepted","message":"Accepted by HAProxy","observedGeneration":2,"lastTransitionTime":"` + ts0 + `"},
				{"type":"Programmed","status":"False","reason":"Invalid","message":"bad","observedGeneration":2,"lastTransitionTime":"` + ts1 + `"}]}`, true},
		{"another condition type stays where it is", `{"conditions":[{"type":"example.com/Ready","status":"True","reason":"Fine","message":"","lastTransitionTime":"1970-01-01T00:00:00Z"}]}`, 2, both, false, nil,
			`{"conditions":[{"type":"example.com/Ready","status":"True","reason":"Fine","message":"","lastTransitionTime":"1970-01-01T00:00:00Z"},` + strings.TrimPrefix(fresh, `{"conditions":[`), true},
		{"the published addresses", written, 2, both, true, addrs,
			strings.TrimSuffix(written, "}") + `,"addresses":[{"type":"IPAddress","value":"203.0.113.7"},{"type":"Hostname","value":"lb.example.com"}]}`, true},
		{"publishing, no address yet: not programmed (AddressNotAssigned), no addresses", strings.TrimSuffix(written, "}") + `,"addresses":[{"type":"IPAddress","value":"203.0.113.7"}]}`, 2, both, true, nil,
			`{"conditions":[
				{"type":"Accepted","status":"True","reason":"Accepted","message":"Accepted by HAProxy","observedGeneration":2,"lastTransitionTime":"` + ts0 + `"},
				{"type":"Programmed","status":"False","reason":"AddressNotAssigned","message":"the published Service has no address yet","observedGeneration":2,"lastTransitionTime":"` + ts1 + `"}]}`, true},
		{"not publishing: addresses left alone", strings.TrimSuffix(written, "}") + `,"addresses":[{"type":"IPAddress","value":"198.51.100.1"}]}`, 2, both, false, addrs,
			strings.TrimSuffix(written, "}") + `,"addresses":[{"type":"IPAddress","value":"198.51.100.1"}]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var status map[string]any
			if tc.status != "" {
				status = obj[map[string]any](t, tc.status)
			}
			got, changed := GatewayStatus(status, tc.gen, Want{Conditions: tc.conds}, tc.publishing, tc.addrs, t1)
			checkStatus(t, "GatewayStatus", got, changed, tc.want, tc.changed)
		})
	}
}

// TestGatewayListeners: status.listeners as declared, in the declared order, each with its
// supportedKinds (none: an empty list), attachedRoutes and conditions (lastTransitionTime kept
// while a status stays); declared addresses in place of the published ones; no listener
// declared: status.listeners left alone.
func TestGatewayListeners(t *testing.T) {
	cond := func(typ, status, reason, msg, at string) string {
		return `{"type":"` + typ + `","status":"` + status + `","reason":"` + reason + `","message":"` + msg + `","observedGeneration":2,"lastTransitionTime":"` + at + `"}`
	}
	gwConds := func(at string) string {
		return `"conditions":[` + cond(Accepted, "True", Accepted, "Accepted by HAProxy", at) + `,` + cond(Programmed, "True", Programmed, "HAProxy runs a configuration that serves it", at) + `]`
	}
	httpRoute := `{"group":"gateway.networking.k8s.io","kind":"HTTPRoute"}`
	okConds := func(at string) string {
		return cond(Accepted, "True", Accepted, "Accepted by HAProxy", at) + `,` + cond(Programmed, "True", Programmed, "HAProxy runs a configuration that serves it", at) + `,` +
			cond(ResolvedRefs, "True", ResolvedRefs, "All references resolved", at) + `,` + cond(Conflicted, "False", "NoConflicts", "No conflicts", at)
	}
	http := func(attached int, at string) string {
		return `{"name":"http","supportedKinds":[` + httpRoute + `],"attachedRoutes":` + fmt.Sprint(attached) + `,"conditions":[` + okConds(at) + `]}`
	}
	invalid := `{"name":"invalid","supportedKinds":[],"attachedRoutes":0,"conditions":[` +
		cond(Accepted, "False", "UnsupportedProtocol", "protocol TCP", ts1) + `,` + cond(Programmed, "False", "Invalid", "protocol TCP", ts1) + `,` +
		cond(ResolvedRefs, "True", ResolvedRefs, "All references resolved", ts1) + `,` + cond(Conflicted, "False", "NoConflicts", "No conflicts", ts1) + `]}`
	decls, problems := Parse([]byte(`# haproxy-sidecar: serves Gateway lb/gw generation=2 addresses=10.244.0.5
# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=http attached=2 kinds=HTTPRoute
# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=invalid attached=0 kinds="" accepted=false accepted.reason=UnsupportedProtocol programmed=false programmed.reason=Invalid message="protocol TCP"
`))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	wants, problems := collectWants(decls)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	want := wants[Object{KindGateway, "lb", "gw"}]
	addr := `"addresses":[{"type":"IPAddress","value":"10.244.0.5"}]`
	tests := []struct {
		name, status string
		want         Want
		out          string
		changed      bool
	}{
		{"none yet: every listener, the declared address", "", want,
			`{` + gwConds(ts1) + `,` + addr + `,"listeners":[` + http(2, ts1) + `,` + invalid + `]}`, true},
		{"a route more: attachedRoutes, the times kept", `{` + gwConds(ts0) + `,` + addr + `,"listeners":[` + http(1, ts0) + `]}`, want,
			`{` + gwConds(ts0) + `,` + addr + `,"listeners":[` + http(2, ts0) + `,` + invalid + `]}`, true},
		{"a listener removed from the spec: gone from the status", `{` + gwConds(ts0) + `,` + addr + `,"listeners":[` + http(2, ts0) + `,{"name":"old","supportedKinds":[],"attachedRoutes":0,"conditions":[]}]}`,
			Want{Conditions: want.Conditions, Addresses: want.Addresses, Listeners: want.Listeners[:1]},
			`{` + gwConds(ts0) + `,` + addr + `,"listeners":[` + http(2, ts0) + `]}`, true},
		{"no listener declared: status.listeners left alone", `{` + gwConds(ts0) + `,"listeners":[` + http(2, ts0) + `]}`, Want{Conditions: want.Conditions},
			`{` + gwConds(ts0) + `,"listeners":[` + http(2, ts0) + `]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var status map[string]any
			if tc.status != "" {
				status = obj[map[string]any](t, tc.status)
			}
			// Publishing another address: the declared one wins.
			got, changed := GatewayStatus(status, 2, tc.want, true, []Address{{IP: "203.0.113.7"}}, t1)
			if len(tc.want.Addresses) == 0 {
				got, changed = GatewayStatus(status, 2, tc.want, false, nil, t1)
			}
			checkStatus(t, "GatewayStatus", got, changed, tc.out, tc.changed)
		})
	}
}

// TestGatewayClassStatus: Accepted and SupportedVersion with observedGeneration; the rest of
// the status (other conditions, supportedFeatures) left as it is.
func TestGatewayClassStatus(t *testing.T) {
	pending := `{"conditions":[{"type":"Accepted","status":"Unknown","reason":"Pending","message":"Waiting for controller","lastTransitionTime":"1970-01-01T00:00:00Z"}],"supportedFeatures":[{"name":"HTTPRoute"}]}`
	written := `{"conditions":[
		{"type":"Accepted","status":"True","reason":"Accepted","message":"Accepted by HAProxy","observedGeneration":3,"lastTransitionTime":"` + ts0 + `"},
		{"type":"SupportedVersion","status":"True","reason":"SupportedVersion","message":"The Gateway API version is supported","observedGeneration":3,"lastTransitionTime":"` + ts0 + `"}],
		"supportedFeatures":[{"name":"HTTPRoute"}]}`
	decls, _ := Parse([]byte("# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=3\n"))
	conds := decls[0].Conditions
	for _, tc := range []struct {
		name, status, out string
		gen               int64
		changed           bool
	}{
		{"from the CRD's default (Pending)", pending, strings.ReplaceAll(written, ts0, ts1), 3, true},
		{"already so: nothing written", written, written, 3, false},
		{"a new generation: observedGeneration follows", written, strings.ReplaceAll(written, `"observedGeneration":3`, `"observedGeneration":4`), 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := GatewayClassStatus(obj[map[string]any](t, tc.status), tc.gen, conds, t1)
			checkStatus(t, "GatewayClassStatus", got, changed, tc.out, tc.changed)
		})
	}
}

// TestRouteParents: the controller's entries of a route's status.parents, one per parent
// declared, with the spec's parentRef as written; other controllers' entries untouched and in
// place; entries of parents no longer served removed.
func TestRouteParents(t *testing.T) {
	const me = "haproxy-sidecar.io/controller"
	spec := `[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"haproxy","namespace":"lb"},
		{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"haproxy","namespace":"lb","sectionName":"https"},
		{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"local"},
		{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"nginx","namespace":"lb"}]`
	gw := Parent{Namespace: "lb", Name: "haproxy"}
	notFound := Condition{Type: ResolvedRefs, Reason: "BackendNotFound", Message: "Service web/missing not found"}
	cond := func(typ, status, reason, msg, at string) string {
		return `{"type":"` + typ + `","status":"` + status + `","reason":"` + reason + `","message":"` + msg + `","observedGeneration":4,"lastTransitionTime":"` + at + `"}`
	}
	acc := func(at string) string { return cond(Accepted, "True", Accepted, "Accepted by HAProxy", at) }
	res := func(at string) string { return cond(ResolvedRefs, "True", ResolvedRefs, "All references resolved", at) }
	nf := func(at string) string {
		return cond(ResolvedRefs, "False", "BackendNotFound", "Service web/missing not found", at)
	}
	mine := func(ref string, conds ...string) string {
		return `{"parentRef":` + ref + `,"controllerName":"` + me + `","conditions":[` + strings.Join(conds, ",") + `]}`
	}
	ref := `{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"haproxy","namespace":"lb"}`
	refHTTPS := `{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"haproxy","namespace":"lb","sectionName":"https"}`
	refLocal := `{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"local"}`
	nginx := `{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"nginx","namespace":"lb"},"controllerName":"example.com/nginx","conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"","lastTransitionTime":"1970-01-01T00:00:00Z"}]}`
	tests := []struct {
		name     string
		parents  string
		want     []ParentWant
		out      string
		changed  bool
		problems string
	}{
		{"none yet: one entry", `[]`, []ParentWant{{gw, []Condition{accepted(), resolved()}}},
			`[` + mine(ref, acc(ts1), res(ts1)) + `]`, true, ""},
		{"already so: nothing written", `[` + mine(ref, acc(ts0), res(ts0)) + `]`, []ParentWant{{gw, []Condition{accepted(), resolved()}}},
			`[` + mine(ref, acc(ts0), res(ts0)) + `]`, false, ""},
		{"a backend gone: ResolvedRefs false, Accepted's time kept", `[` + mine(ref, acc(ts0), res(ts0)) + `]`, []ParentWant{{gw, []Condition{accepted(), notFound}}},
			`[` + mine(ref, acc(ts0), nf(ts1)) + `]`, true, ""},
		{"another controller's entry stays first; ours after it", `[` + nginx + `]`, []ParentWant{{gw, []Condition{accepted(), resolved()}}},
			`[` + nginx + `,` + mine(ref, acc(ts1), res(ts1)) + `]`, true, ""},
		{"ours before another's: kept in place", `[` + mine(ref, acc(ts0), res(ts0)) + `,` + nginx + `]`, []ParentWant{{gw, []Condition{accepted(), resolved()}}},
			`[` + mine(ref, acc(ts0), res(ts0)) + `,` + nginx + `]`, false, ""},
		{"a section, and a parentRef without namespace (the route's)", `[]`,
			[]ParentWant{{Parent{Namespace: "lb", Name: "haproxy", Section: "https"}, []Condition{accepted(), resolved()}}, {Parent{Namespace: "web", Name: "local"}, []Condition{accepted(), resolved()}}},
			`[` + mine(refHTTPS, acc(ts1), res(ts1)) + `,` + mine(refLocal, acc(ts1), res(ts1)) + `]`, true, ""},
		{"a parent no longer served: our entry goes, the other's stays", `[` + mine(ref, acc(ts0), res(ts0)) + `,` + nginx + `]`, nil,
			`[` + nginx + `]`, true, ""},
		{"a parent the spec does not name: left out", `[]`, []ParentWant{{Parent{Namespace: "lb", Name: "gone"}, []Condition{accepted(), resolved()}}},
			`[]`, false, "no parentRef of the route's spec names lb/gone"},
		{"our entry of an unknown condition type: the declared ones only", `[` + mine(ref, acc(ts0), res(ts0), cond("PartiallyInvalid", "True", "UnsupportedValue", "", ts0)) + `]`,
			[]ParentWant{{gw, []Condition{accepted(), resolved()}}}, `[` + mine(ref, acc(ts0), res(ts0)) + `]`, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, problems := RouteParents(obj[[]any](t, tc.parents), obj[[]any](t, spec), "web", me, tc.want, 4, t1)
			checkStatus(t, "RouteParents", out, changed, tc.out, tc.changed)
			if (tc.problems == "") != (len(problems) == 0) || tc.problems != "" && !strings.Contains(problems[0].Error(), tc.problems) {
				t.Errorf("problems %v, want %q", problems, tc.problems)
			}
		})
	}
}

// TestLiveAnnotations: the services ConfigMap's annotations, patched only when they differ.
func TestLiveAnnotations(t *testing.T) {
	patch, changed := LiveAnnotations(map[string]string{"other": "x"}, "abc", t0)
	if !changed || string(patch) != `{"metadata":{"annotations":{"haproxy-sidecar.io/live-config":"abc","haproxy-sidecar.io/live-since":"`+ts0+`"}}}` {
		t.Errorf("LiveAnnotations = %s, %v", patch, changed)
	}
	if _, changed := LiveAnnotations(map[string]string{AnnotationLiveConfig: "abc", AnnotationLiveSince: ts0}, "abc", t0); changed {
		t.Error("the same annotations written again")
	}
	if _, changed := LiveAnnotations(map[string]string{AnnotationLiveConfig: "abc", AnnotationLiveSince: ts0}, "abd", t1); !changed {
		t.Error("a new live configuration not written")
	}
}
