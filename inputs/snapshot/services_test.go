package snapshot

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

func podNames(svc *record.Record) []string {
	return slices.Sorted(maps.Keys(record.Plain(svc.Field("pods")).(map[string]any)))
}

func TestBuildServices(t *testing.T) {
	pods := []*corev1.Pod{
		readyPod("shop", "web-1", "10.1.0.1", map[string]string{"app": "web", "tier": "front"}),
		readyPod("shop", "web-2", "10.1.0.2", map[string]string{"app": "web", "tier": "back"}),
		readyPod("shop", "api-1", "10.1.0.3", map[string]string{"app": "api"}),
		readyPod("other", "web-9", "10.2.0.1", map[string]string{"app": "web"}),
		func() *corev1.Pod { // not ready: excluded
			p := readyPod("shop", "web-3", "10.1.0.4", map[string]string{"app": "web"})
			p.Status.ContainerStatuses[0].Ready = false
			return p
		}(),
	}
	tests := []struct {
		name     string
		services map[string]string
		want     map[string][]string // service -> pod names
	}{
		{
			name:     "selector as object",
			services: map[string]string{"web": `{"namespace":"shop","selector":{"app":"web"}}`},
			want:     map[string][]string{"web": {"web-1", "web-2"}},
		},
		{
			name:     "selector as object with two labels",
			services: map[string]string{"web": `{"namespace":"shop","selector":{"app":"web","tier":"front"}}`},
			want:     map[string][]string{"web": {"web-1"}},
		},
		{
			name:     "selector as string",
			services: map[string]string{"web": `{"namespace":"shop","selector":"app=web,tier in (back)"}`},
			want:     map[string][]string{"web": {"web-2"}},
		},
		{
			name:     "set-based string selector",
			services: map[string]string{"all": `{"namespace":"shop","selector":"app in (web,api),tier!=front"}`},
			want:     map[string][]string{"all": {"api-1", "web-2"}},
		},
		{
			name:     "empty selector selects the whole namespace",
			services: map[string]string{"all": `{"namespace":"shop","selector":{}}`},
			want:     map[string][]string{"all": {"api-1", "web-1", "web-2"}},
		},
		{
			name:     "pods only from the service's namespace",
			services: map[string]string{"o": `{"namespace":"other","selector":{"app":"web"}}`},
			want:     map[string][]string{"o": {"web-9"}},
		},
		{
			name:     "no pods match",
			services: map[string]string{"n": `{"namespace":"shop","selector":{"app":"nope"}}`, "e": `{"namespace":"empty","selector":{"app":"web"}}`},
			want:     map[string][]string{"n": nil, "e": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := Build(&Objects{
				ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", tt.services)},
				Pods:       pods,
			}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Services) != len(tt.want) {
				t.Fatalf("got %d services, want %d", len(snap.Services), len(tt.want))
			}
			for _, svc := range snap.Services {
				name := svc.Field("name").(string)
				want, ok := tt.want[name]
				if !ok {
					t.Fatalf("unexpected service %q", name)
				}
				if got := podNames(svc); !slices.Equal(got, want) {
					t.Errorf("service %s pods = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestBuildServiceContent(t *testing.T) {
	services := map[string]string{
		"web": `{
			"namespace": "shop",
			"selector": {"app": "web"},
			"hostnames": ["shop.example.com", "www.example.com"],
			"ports": [8080, 8443],
			"ssl": true,
			"path": "/shop",
			"weight": 1.5,
			"extra": {"nested": [1, {"x": null}]}
		}`,
		"api":   `{"namespace":"shop","selector":"app=api"}`,
		"admin": `{"namespace":"shop","selector":{"app":"admin"},"name":"ignored","pods":"ignored"}`,
	}
	pod := readyPod("shop", "web-1", "10.1.0.1", map[string]string{"app": "web"})
	snap, err := Build(&Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", services)},
		Pods:       []*corev1.Pod{pod},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range snap.Services {
		names = append(names, s.Field("name").(string))
	}
	if want := []string{"admin", "api", "web"}; !slices.Equal(names, want) {
		t.Fatalf("service order = %v, want %v", names, want)
	}
	if p := record.Plain(snap.Services[0].Field("pods")); !reflect.DeepEqual(p, map[string]any{}) {
		t.Errorf("admin: name/pods from the entry must be replaced: pods = %v", p)
	}
	web := snap.Services[2]
	checks := map[string]any{
		"namespace": "shop",
		"selector":  map[string]any{"app": "web"},
		"hostnames": []any{"shop.example.com", "www.example.com"},
		"ports":     []any{int64(8080), int64(8443)},
		"ssl":       true,
		"path":      "/shop",
		"weight":    1.5,
		"extra":     map[string]any{"nested": []any{int64(1), map[string]any{"x": nil}}},
		"name":      "web",
	}
	for k, want := range checks {
		if got := record.Plain(web.Field(k)); !reflect.DeepEqual(got, want) {
			t.Errorf("web[%q] = %#v, want %#v", k, got, want)
		}
	}
	if got := snap.Services[1].Field("selector"); got != "app=api" {
		t.Errorf("string selector passed through as %#v", got)
	}

	p, ok := record.Plain(web.Field("pods")).(map[string]any)["web-1"].(map[string]any)
	if !ok {
		t.Fatalf("pod web-1 missing or not a map: %#v", web.Field("pods"))
	}
	if p["apiVersion"] != "v1" || p["kind"] != "Pod" {
		t.Errorf("pod apiVersion/kind = %v/%v", p["apiVersion"], p["kind"])
	}
	md := p["metadata"].(map[string]any)
	if md["name"] != "web-1" || md["namespace"] != "shop" || md["uid"] != "uid-web-1" {
		t.Errorf("pod metadata = %v", md)
	}
	if _, ok := md["managedFields"]; ok {
		t.Error("managedFields not dropped")
	}
	if ip := p["status"].(map[string]any)["podIP"]; ip != "10.1.0.1" {
		t.Errorf("status.podIP = %v", ip)
	}
	port := p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["containerPort"]
	if port != int64(8080) {
		t.Errorf("containerPort = %#v, want int64 8080", port)
	}
	if len(pod.ManagedFields) != 1 {
		t.Error("Build modified the input pod")
	}
}

func TestBuildServicesAbsent(t *testing.T) {
	snap, err := Build(&Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap("elsewhere", "services", map[string]string{"x": "not json"})},
	}, Options{})
	if err != nil {
		t.Fatalf("a services ConfigMap outside the namespace must be ignored: %v", err)
	}
	if snap.Services != nil {
		t.Errorf("services = %v, want none", snap.Services)
	}
	if want := (Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services"}); snap.ServicesRef != want {
		t.Errorf("ServicesRef = %v", snap.ServicesRef)
	}
}

func TestBuildServiceErrors(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		reasons   []string
		line, col int
	}{
		{name: "invalid JSON", value: "{\n  \"namespace\": \"shop\",\n  \"selector\": {\"app\" \"web\"}\n}",
			reasons: []string{"invalid JSON", "line 3 column 22"}, line: 3, col: 22},
		{name: "trailing garbage", value: `{"namespace":"shop","selector":{}} x`,
			reasons: []string{"invalid JSON", "after top-level value"}, line: 1, col: 36},
		{name: "truncated", value: `{"namespace":"shop"`, reasons: []string{"invalid JSON", "unexpected end"}, line: 1},
		{name: "empty", value: "  ", reasons: []string{"empty value"}},
		{name: "array", value: `["shop"]`, reasons: []string{"JSON array", "want a JSON object"}},
		{name: "string", value: `"shop"`, reasons: []string{"JSON string", "want a JSON object"}},
		{name: "null", value: `null`, reasons: []string{"JSON null"}},
		{name: "missing namespace", value: `{"selector":{"app":"web"}}`, reasons: []string{`missing required field "namespace"`}},
		{name: "namespace not a string", value: `{"namespace":7,"selector":{}}`, reasons: []string{`"namespace" is a JSON number`}},
		{name: "namespace invalid", value: `{"namespace":"Shop_1","selector":{}}`, reasons: []string{`"Shop_1" is not a valid namespace name`}},
		{name: "namespace empty", value: `{"namespace":"","selector":{}}`, reasons: []string{`"" is not a valid namespace name`}},
		{name: "missing selector", value: `{"namespace":"shop"}`, reasons: []string{`missing required field "selector"`}},
		{name: "selector null", value: `{"namespace":"shop","selector":null}`, reasons: []string{`"selector"`, "JSON null"}},
		{name: "selector array", value: `{"namespace":"shop","selector":["app"]}`, reasons: []string{`"selector"`, "JSON array"}},
		{name: "selector value not a string", value: `{"namespace":"shop","selector":{"version":2}}`,
			reasons: []string{`label "version" has a JSON number value`}},
		{name: "selector bad label key", value: `{"namespace":"shop","selector":{"bad key":"x"}}`,
			reasons: []string{"invalid label selector", "bad key"}},
		{name: "selector bad label value", value: `{"namespace":"shop","selector":{"app":"a b"}}`,
			reasons: []string{"invalid label selector", "a b"}},
		{name: "selector bad string", value: `{"namespace":"shop","selector":"app in (web"}`,
			reasons: []string{`invalid label selector "app in (web"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{
				configMap(ns, "services", map[string]string{"svc": tt.value}),
			}}, Options{})
			ie := inputError(t, err, Ref{Kind: "ConfigMap", Namespace: ns, Name: "services", Key: "svc"}, tt.reasons...)
			if ie.Line != tt.line || (tt.col != 0 && ie.Col != tt.col) {
				t.Errorf("position = line %d column %d, want line %d column %d", ie.Line, ie.Col, tt.line, tt.col)
			}
		})
	}
}

func TestBuildServiceErrorsAll(t *testing.T) {
	_, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{
		configMap(ns, "services", map[string]string{
			"zeta":  `{"namespace":"shop"}`,
			"alpha": `{"selector":{}}`,
			"good":  `{"namespace":"shop","selector":{}}`,
			"mid":   `[`,
		}),
	}}, Options{})
	inputError(t, err, Ref{Kind: "ConfigMap", Namespace: ns, Name: "services", Key: "alpha"}, "namespace")
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T does not list all the errors", err)
	}
	var keys []string
	for _, e := range joined.Unwrap() {
		var ie *InputError
		if !errors.As(e, &ie) {
			t.Fatalf("%v is not an InputError", e)
		}
		keys = append(keys, ie.Ref.Key)
	}
	if want := []string{"alpha", "mid", "zeta"}; !slices.Equal(keys, want) {
		t.Errorf("errors for keys %v, want %v", keys, want)
	}
	if n := strings.Count(err.Error(), "\n"); n != 2 {
		t.Errorf("message has %d line breaks, want one error per line: %q", n, err)
	}
}

func TestBuildServiceBinaryData(t *testing.T) {
	cm := configMap(ns, "services", nil)
	cm.BinaryData = map[string][]byte{"web": []byte(`{}`)}
	_, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{cm}}, Options{})
	inputError(t, err, Ref{Kind: "ConfigMap", Namespace: ns, Name: "services", Key: "web"}, "binaryData")
}

func TestPodReady(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name   string
		modify func(*corev1.Pod)
		want   bool
	}{
		{"running and ready", func(*corev1.Pod) {}, true},
		{"no pod IP", func(p *corev1.Pod) { p.Status.PodIP = "" }, false},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
		{"pending with IP", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, true},
		{"one container not ready", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "sidecar"})
		}, false},
		{"Ready condition False", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, false},
		{"Ready condition Unknown", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionUnknown }, true},
		{"ContainersReady False only", func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }, true},
		{"no statuses or conditions (hand-written manifest)", func(p *corev1.Pod) {
			p.Status.ContainerStatuses, p.Status.Conditions = nil, nil
		}, true},
		{"init container not ready does not count", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", Ready: false}}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := readyPod("shop", "p", "10.0.0.9", nil)
			tt.modify(p)
			if got := PodReady(p); got != tt.want {
				t.Errorf("PodReady = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSelectPodsIndexed checks that the label index gives what a full scan gives, for typed
// pods and for pods a source converted.
func TestSelectPodsIndexed(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 500 {
		pods = append(pods, readyPod("big", fmt.Sprintf("p%03d", i), fmt.Sprintf("10.3.%d.%d", i/250, i%250), map[string]string{
			"app": fmt.Sprintf("app%d", i%50), "tier": fmt.Sprintf("t%d", i%3),
		}))
	}
	var conv PodConverter
	var converted []*Pod
	for _, p := range pods {
		converted = append(converted, conv.Convert(p))
	}
	selectors := []string{
		`{"app":"app7"}`, `{"app":"app7","tier":"t1"}`, `"app in (app1,app2),tier=t0"`,
		`"app=app3,tier notin (t0)"`, `"tier"`, `"!tier"`, `{"app":"none"}`, `"app in (none, app4)"`, `{}`,
	}
	shared := newPodIndex(pods, nil, nil, nil) // one index for every selector: its keys made in turn
	indexes := map[string]func() *podIndex{
		"typed":     func() *podIndex { return newPodIndex(pods, nil, nil, nil) },
		"converted": func() *podIndex { return newPodIndex(nil, converted, nil, nil) },
		"shared":    func() *podIndex { return shared },
	}
	for name, index := range indexes {
		for _, s := range selectors {
			t.Run(name+" "+s, func(t *testing.T) {
				_, sel, ierr := decodeService(Ref{}, []byte(`{"namespace":"big","selector":`+s+`}`))
				if ierr != nil {
					t.Fatal(ierr)
				}
				var got []string
				for _, e := range index().selectPods("big", sel) {
					got = append(got, e.name())
				}
				var want []string
				for _, p := range pods {
					if sel.Matches(labels.Set(p.Labels)) {
						want = append(want, p.Name)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("indexed selection gave %d pods, a scan %d", len(got), len(want))
				}
			})
		}
	}
}

// TestServicesAreRecords: a service is a record, and so is every map in it, at any depth (a
// fifth of a Go map's memory); services of the same keys share their key list, and so do
// their selectors, through the cache and across Builds (a service made again after a pod's
// change has its entry's list).
func TestServicesAreRecords(t *testing.T) {
	services := map[string]string{
		"api": `{"namespace":"shop","selector":{"app":"api"},"ports":[8080]}`,
		"web": `{"namespace":"shop","selector":{"app":"web"},"ports":[80],"extra":{"notes":["a",{"deep":{"x":1}}]}}`,
		"www": `{"namespace":"shop","selector":{"app":"www"},"ports":[80]}`,
	}
	pods := []*corev1.Pod{readyPod("shop", "api-1", "10.1.0.1", map[string]string{"app": "api"})}
	for i := range 300 { // the index is updated, not made anew, for one pod's change
		pods = append(pods, readyPod("other", fmt.Sprintf("o-%d", i), "10.2.0.1", map[string]string{"app": "o"}))
	}
	cache := &PodCache{}
	build := func() *Snapshot {
		for _, p := range pods {
			p.ResourceVersion = "1" // the same pod as at the last Build: kept
		}
		snap, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", services)}, Pods: pods}, Options{PodCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	first := build()
	var noMaps func(path string, v any)
	noMaps = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			t.Errorf("%s is a map", path)
		case *record.Record:
			for k, e := range x.All() {
				if k != "pods" { // the pods' records: the converter's, tested with it
					noMaps(path+"."+k, e)
				}
			}
		case []any:
			for i, e := range x {
				noMaps(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	for _, s := range first.Services {
		noMaps(s.Field("name").(string), s)
	}
	api, web, www := first.Services[0], first.Services[1], first.Services[2]
	if !api.SameKeys(www) || api.SameKeys(web) {
		t.Error("services of the same keys do not share their key list (or of other keys do)")
	}
	if !api.Field("selector").(*record.Record).SameKeys(web.Field("selector").(*record.Record)) {
		t.Error("selectors of the same keys do not share their key list")
	}
	if got := record.Plain(web.Field("extra")); !reflect.DeepEqual(got, map[string]any{"notes": []any{"a", map[string]any{"deep": map[string]any{"x": int64(1)}}}}) {
		t.Errorf("web's extra is %#v", got)
	}

	pods = append(pods, readyPod("shop", "api-2", "10.1.0.2", map[string]string{"app": "api"}))
	second := build()
	if second.Services[0] == api || !second.Services[0].SameKeys(api) {
		t.Error("api, whose pods changed, is not a new record of the same key list")
	}
	if second.Services[2] != www {
		t.Error("www, unchanged, is not the last Build's record")
	}
	if second.Services[0].Field("selector") != api.Field("selector") {
		t.Error("api's entry was decoded again")
	}
}

// TestServicesShareEqualParts: the services are converted as watched objects are (one
// converter, the cache's), so equal nested parts of two services (selectors, ports, any map or
// list) are one object, not a copy each; a service entry is not a Kubernetes object: a
// "managedFields" of its own is kept, and its "metadata" is shared as any other part.
func TestServicesShareEqualParts(t *testing.T) {
	entry := `{"namespace":"shop","selector":{"app":"web"},"ports":[{"name":"http","port":80}],` +
		`"metadata":{"team":"a"},"managedFields":[1]}`
	services := map[string]string{"a": entry, "b": entry}
	snap, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", services)}}, Options{PodCache: &PodCache{}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.Services[0], snap.Services[1]
	if a == b || a.Field("name") != "a" || b.Field("name") != "b" {
		t.Fatalf("services %v, %v", record.Plain(a), record.Plain(b))
	}
	for _, k := range []string{"selector", "metadata"} {
		if a.Field(k).(*record.Record) != b.Field(k).(*record.Record) {
			t.Errorf("the services' equal %s are two records", k)
		}
	}
	pa, pb := a.Field("ports").([]any), b.Field("ports").([]any)
	if &pa[0] != &pb[0] {
		t.Error("the services' equal ports are two lists")
	}
	if got := record.Plain(a.Field("managedFields")); !reflect.DeepEqual(got, []any{int64(1)}) {
		t.Errorf("a service's managedFields is %#v, want [1]", got)
	}
	// What templates see: the entry as JSON decodes it, every key kept.
	want, _, derr := decodeService(Ref{}, []byte(entry))
	if derr != nil {
		t.Fatal(derr)
	}
	want["name"] = "a"
	got := record.Plain(a).(map[string]any)
	delete(got, "pods")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("service a is\n%#v\nwant\n%#v", got, want)
	}
}
