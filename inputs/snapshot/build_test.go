package snapshot

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

func TestBuildTemplates(t *testing.T) {
	tests := []struct {
		name    string
		cms     []*corev1.ConfigMap
		opts    Options
		want    map[string]string
		wantRef Ref
		errRef  *Ref
		reasons []string
	}{
		{name: "no config ConfigMap: built-in default", want: nil, wantRef: Ref{}},
		{
			name:    "config ConfigMap in another namespace is ignored",
			cms:     []*corev1.ConfigMap{configMap("default", "config", map[string]string{"template": "x"})},
			want:    nil,
			wantRef: Ref{},
		},
		{
			name:    "all keys",
			cms:     []*corev1.ConfigMap{configMap(ns, "config", map[string]string{"template": "main", "backends": "part"})},
			want:    map[string]string{"template": "main", "backends": "part"},
			wantRef: Ref{Kind: "ConfigMap", Namespace: ns, Name: "config"},
		},
		{
			name:    "custom names",
			cms:     []*corev1.ConfigMap{configMap("edge", "haproxy", map[string]string{"haproxy.cfg.j2": "main"})},
			opts:    Options{Namespace: "edge", ConfigConfigMap: "haproxy", TemplateKey: "haproxy.cfg.j2"},
			want:    map[string]string{"haproxy.cfg.j2": "main"},
			wantRef: Ref{Kind: "ConfigMap", Namespace: "edge", Name: "haproxy"},
		},
		{
			name:    "template key missing",
			cms:     []*corev1.ConfigMap{configMap(ns, "config", map[string]string{"tmpl": "x", "other": "y"})},
			errRef:  &Ref{Kind: "ConfigMap", Namespace: ns, Name: "config", Key: "template"},
			reasons: []string{`no key "template"`, "its keys: other, tmpl"},
		},
		{
			name:    "empty ConfigMap",
			cms:     []*corev1.ConfigMap{configMap(ns, "config", nil)},
			errRef:  &Ref{Kind: "ConfigMap", Namespace: ns, Name: "config", Key: "template"},
			reasons: []string{`no key "template"`, "no data keys"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := Build(&Objects{ConfigMaps: tt.cms}, tt.opts)
			if tt.errRef != nil {
				inputError(t, err, *tt.errRef, tt.reasons...)
				if snap != nil {
					t.Error("a Snapshot came with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(snap.Templates, tt.want) {
				t.Errorf("templates = %v, want %v", snap.Templates, tt.want)
			}
			if snap.TemplateRef != tt.wantRef {
				t.Errorf("TemplateRef = %v, want %v", snap.TemplateRef, tt.wantRef)
			}
			wantKey := tt.opts.TemplateKey
			if wantKey == "" {
				wantKey = "template"
			}
			if snap.TemplateKey != wantKey {
				t.Errorf("TemplateKey = %q, want %q", snap.TemplateKey, wantKey)
			}
		})
	}
}

func TestBuildCopiesTheRest(t *testing.T) {
	env := map[string]string{"DOMAIN": "example.com"}
	cm := configMap(ns, "config", map[string]string{"template": "x"})
	snap, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{cm}, Revision: "rv-42"},
		Options{Env: env, StatsPassword: "s3cret", StatsPasswordSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != "rv-42" {
		t.Errorf("Revision = %q", snap.Revision)
	}
	if want := (Stats{Username: "stats", Password: "s3cret", PasswordSet: true}); snap.Stats != want {
		t.Errorf("Stats = %+v", snap.Stats)
	}
	if !reflect.DeepEqual(snap.Env, env) {
		t.Errorf("Env = %v", snap.Env)
	}
	env["DOMAIN"] = "changed"
	cm.Data["template"] = "changed"
	if snap.Env["DOMAIN"] != "example.com" || snap.Templates["template"] != "x" {
		t.Error("the Snapshot shares maps with its inputs")
	}

	snap, err = Build(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Env == nil || snap.Stats.Username != "stats" || snap.Stats.PasswordSet {
		t.Errorf("empty build: Env %v, Stats %+v", snap.Env, snap.Stats)
	}
}

func TestBuildErrorsFromAllParts(t *testing.T) {
	_, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{
		configMap(ns, "services", map[string]string{"web": "{"}),
		configMap(ns, "certificates", map[string]string{"web.pem": "x"}),
		configMap(ns, "config", map[string]string{}),
	}}, Options{})
	inputError(t, err, Ref{Kind: "ConfigMap", Namespace: ns, Name: "services", Key: "web"})
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 3 {
		t.Fatalf("want 3 errors (service, certificate, template), got %v", err)
	}
}

// TestBuildDeterministic builds the same objects in shuffled orders and wants equal Snapshots.
func TestBuildDeterministic(t *testing.T) {
	cert, key := testcert.Pair(t, "web")
	objs := func() *Objects {
		services := map[string]string{}
		var pods []*corev1.Pod
		for i := range 30 {
			services[fmt.Sprintf("svc%02d", i)] = fmt.Sprintf(`{"namespace":"ns%d","selector":{"app":"a%d"},"ports":[80]}`, i%4, i)
			for j := range 3 {
				pods = append(pods, readyPod(fmt.Sprintf("ns%d", i%4), fmt.Sprintf("p%d-%d", i, j),
					fmt.Sprintf("10.0.%d.%d", i, j), map[string]string{"app": fmt.Sprintf("a%d", i)}))
			}
		}
		return &Objects{
			ConfigMaps: []*corev1.ConfigMap{
				configMap(ns, "services", services),
				configMap(ns, "certificates", map[string]string{"web.pem": string(cert)}),
				configMap(ns, "config", map[string]string{"template": "t"}),
				configMap("other", "x", nil),
			},
			Secrets: []*corev1.Secret{secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{"web.key": key})},
			Pods:    pods,
		}
	}
	first, err := Build(objs(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Services) != 30 || len(record.Plain(first.Services[0].Field("pods")).(map[string]any)) != 3 {
		t.Fatalf("unexpected snapshot: %d services", len(first.Services))
	}
	for i := range 5 {
		o := objs()
		r := rand.New(rand.NewPCG(uint64(i), 7))
		r.Shuffle(len(o.Pods), func(a, b int) { o.Pods[a], o.Pods[b] = o.Pods[b], o.Pods[a] })
		r.Shuffle(len(o.ConfigMaps), func(a, b int) { o.ConfigMaps[a], o.ConfigMaps[b] = o.ConfigMaps[b], o.ConfigMaps[a] })
		again, err := Build(o, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("shuffle %d: Build gave a different Snapshot", i)
		}
	}
}

// benchObjects is n services with podsPer ready pods each, one namespace per service when
// spread, else all in one namespace.
func benchObjects(n, podsPer int, spread bool) *Objects {
	services := make(map[string]string, n)
	pods := make([]*corev1.Pod, 0, n*podsPer)
	for i := range n {
		namespace := "apps"
		if spread {
			namespace = fmt.Sprintf("ns-%05d", i)
		}
		services[fmt.Sprintf("svc-%05d", i)] = fmt.Sprintf(
			`{"namespace":%q,"selector":{"app":"app-%05d"},"hostnames":["s%d.example.com"],"ports":[8080]}`, namespace, i, i)
		for j := range podsPer {
			pods = append(pods, readyPod(namespace, fmt.Sprintf("app-%05d-%d", i, j),
				fmt.Sprintf("10.%d.%d.%d", i/256%256, i%256, j), map[string]string{"app": fmt.Sprintf("app-%05d", i), "pod-template-hash": "abc"}))
		}
	}
	return &Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", services)}, Pods: pods}
}

func BenchmarkBuild10000(b *testing.B) {
	cases := []struct {
		name      string
		spread    bool
		cached    bool
		converted bool
	}{
		{"namespaces=10000", true, false, false},
		{"namespaces=1", false, false, false},
		{"namespaces=10000/cached", true, true, false},
		// Pods the file source converted as it read them (Objects.ConvertedPods).
		{"namespaces=100/converted", false, false, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			objs := benchObjects(10000, 10, c.spread)
			opts := Options{}
			if c.converted {
				var conv PodConverter
				for i, p := range objs.Pods {
					p.Namespace = fmt.Sprintf("ns-%03d", i/10%100)
					objs.ConvertedPods = append(objs.ConvertedPods, conv.Convert(p))
				}
				for k, v := range objs.ConfigMaps[0].Data {
					var i int
					fmt.Sscanf(k, "svc-%d", &i)
					objs.ConfigMaps[0].Data[k] = strings.Replace(v, `"apps"`, fmt.Sprintf("%q", fmt.Sprintf("ns-%03d", i%100)), 1)
				}
				objs.Pods = nil
				opts.PodCache = &PodCache{}
			}
			if c.cached {
				for i, p := range objs.Pods {
					p.ResourceVersion = fmt.Sprint(i)
				}
				opts.PodCache = &PodCache{}
				if _, err := Build(objs, opts); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				if c.cached {
					for j := i % 100; j < len(objs.Pods); j += 100 {
						objs.Pods[j].ResourceVersion = fmt.Sprintf("%d-%d", j, i)
					}
					i++
				}
				snap, err := Build(objs, opts)
				if err != nil {
					b.Fatal(err)
				}
				if len(snap.Services) != 10000 {
					b.Fatal("wrong service count")
				}
			}
		})
	}
}

func TestPodCache(t *testing.T) {
	readyPodRV := func(name, rv string) *corev1.Pod {
		p := readyPod("shop", name, "10.0.0.1", map[string]string{"app": "web"})
		p.ResourceVersion = rv
		return p
	}
	services := configMap(ns, "services", map[string]string{"web": `{"namespace":"shop","selector":{"app":"web"}}`})
	build := func(t *testing.T, cache *PodCache, pods ...*corev1.Pod) *record.Record {
		t.Helper()
		snap, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{services}, Pods: pods}, Options{PodCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return snap.Services[0].Field("pods").(*record.Record)
	}
	pod := func(pods *record.Record, name string) *record.Record {
		p, _ := pods.Get(name)
		return p.(*record.Record)
	}

	cache := &PodCache{}
	first := build(t, cache, readyPodRV("a", "1"), readyPodRV("b", "1"), readyPodRV("manual", ""))
	if cache.Len() != 2 {
		t.Fatalf("cache holds %d pods, want 2 (pods without resourceVersion are not cached)", cache.Len())
	}
	second := build(t, cache, readyPodRV("a", "1"), readyPodRV("b", "2"), readyPodRV("manual", ""))
	if pod(first, "a") != pod(second, "a") {
		t.Error("unchanged pod a was converted again")
	}
	if cache.Len() != 2 {
		t.Errorf("cache holds %d pods after b changed, want 2 (b's old version dropped)", cache.Len())
	}
	if pod(first, "b") == pod(second, "b") {
		t.Error("pod b changed (resourceVersion 2) but its old form was reused")
	}
	if got := pod(second, "b").Map()["metadata"].(map[string]any)["resourceVersion"]; got != "2" {
		t.Errorf("pod b resourceVersion = %v, want 2", got)
	}
	if pod(first, "manual") == pod(second, "manual") {
		t.Error("a pod without resourceVersion was reused")
	}
	build(t, cache, readyPodRV("b", "2"))
	if cache.Len() != 1 {
		t.Errorf("cache holds %d pods after a is gone, want 1", cache.Len())
	}
	if !reflect.DeepEqual(build(t, nil, readyPodRV("b", "2")).Map(), build(t, cache, readyPodRV("b", "2")).Map()) {
		t.Error("a cached Build differs from an uncached one")
	}
}

func TestBuildTemplatesFromConfigSecret(t *testing.T) {
	raw := "global\n  maxconn 100\n"
	objs := &Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap("lb", "config", map[string]string{"template": "ignored"})},
		Secrets:    []*corev1.Secret{secret("lb", "haproxy-config", corev1.SecretTypeOpaque, nil, map[string][]byte{"haproxy.cfg": []byte(raw)})},
	}
	t.Run("the Secret wins over the ConfigMap", func(t *testing.T) {
		snap, err := Build(objs, Options{ConfigSecret: "haproxy-config", TemplateKey: "haproxy.cfg"})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Templates["haproxy.cfg"] != raw {
			t.Errorf("templates = %v", snap.Templates)
		}
		if want := (Ref{Kind: "Secret", Namespace: "lb", Name: "haproxy-config"}); snap.TemplateRef != want {
			t.Errorf("TemplateRef = %v, want %v", snap.TemplateRef, want)
		}
	})
	t.Run("a missing Secret is an error naming it", func(t *testing.T) {
		_, err := Build(objs, Options{ConfigSecret: "absent", TemplateKey: "haproxy.cfg"})
		inputError(t, err, Ref{Kind: "Secret", Namespace: "lb", Name: "absent"}, "does not exist")
	})
	t.Run("a Secret without the key is an error naming the key", func(t *testing.T) {
		_, err := Build(objs, Options{ConfigSecret: "haproxy-config"})
		inputError(t, err, Ref{Kind: "Secret", Namespace: "lb", Name: "haproxy-config", Key: "template"}, "no key", "haproxy.cfg")
	})
}

// TestBuildConvertedPods: pods a source converted (Objects.ConvertedPods) give the Snapshot
// typed pods give, not-ready ones included (left out of both).
func TestBuildConvertedPods(t *testing.T) {
	objs := benchObjects(50, 3, false)
	notReady := readyPod("apps", "app-00001-9", "10.9.9.9", map[string]string{"app": "app-00001"})
	notReady.Status.ContainerStatuses[0].Ready = false
	objs.Pods = append(objs.Pods, notReady, everything())
	want, err := Build(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var conv PodConverter
	converted := &Objects{ConfigMaps: objs.ConfigMaps}
	for _, p := range objs.Pods {
		converted.ConvertedPods = append(converted.ConvertedPods, conv.Convert(p))
	}
	if converted.ConvertedPods[len(objs.Pods)-2].Object() != nil {
		t.Error("a pod that is not ready was converted")
	}
	got, err := Build(converted, Options{PodCache: &PodCache{}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("converted pods give another Snapshot than typed pods")
	}
	if len(record.Plain(got.Services[1].Field("pods")).(map[string]any)) != 3 {
		t.Errorf("service 1 has pods %v, want the 3 ready ones", podNames(got.Services[1]))
	}
}

// TestPodCacheServices: service entries whose text did not change are not decoded again, and
// a service that did not change is the last Build's map.
func TestPodCacheServices(t *testing.T) {
	cache := &PodCache{}
	build := func(services map[string]string) *Snapshot {
		t.Helper()
		snap, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", services)}}, Options{PodCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	web := `{"namespace":"shop","selector":{"app":"web"},"hostnames":["a.example.com"]}`
	first := build(map[string]string{"web": web, "api": `{"namespace":"shop","selector":{"app":"api"}}`})
	second := build(map[string]string{"web": web, "api": `{"namespace":"shop","selector":{"app":"api2"}}`})
	if !same(first.Services[1].Field("hostnames"), second.Services[1].Field("hostnames")) {
		t.Error("an unchanged service entry was decoded again")
	}
	if !same(first.Services[1], second.Services[1]) {
		t.Error("an unchanged service (entry and pods) is a new map")
	}
	if same(first.Services[0], second.Services[0]) {
		t.Error("a changed service entry is the last Build's map")
	}
	if got := second.Services[0].Field("selector").(*record.Record).Field("app"); got != "api2" {
		t.Errorf("a changed service entry kept its old value: selector app = %v", got)
	}
	if _, err := Build(&Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", map[string]string{"web": "{"})}}, Options{PodCache: cache}); err == nil {
		t.Error("a bad entry gave no error")
	}
	kept := 0
	for _, e := range cache.entries {
		if e.d.svc != nil {
			kept++
		}
	}
	if kept != 0 {
		t.Errorf("the cache keeps %d decoded entries that are gone", kept)
	}
}
