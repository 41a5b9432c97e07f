package snapshot

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// TestDecodeOneInputEach: every services key, the template set and every certificate is one
// input with its own version and its own error; one bad input does not hide the others.
func TestDecodeOneInputEach(t *testing.T) {
	cert, key := testcert.Pair(t, "web.example.com")
	objs := &Objects{
		ConfigMaps: []*corev1.ConfigMap{
			configMap(ns, "services", map[string]string{
				"web": `{"namespace":"shop","selector":{"app":"web"}}`,
				"api": `{"namespace":"shop"`,
			}),
			configMap(ns, "config", map[string]string{"template": "x"}),
			configMap(ns, "certificates", map[string]string{"web.pem": string(cert), "lonely.pem": string(cert)}),
		},
		Secrets: []*corev1.Secret{secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{"web.pem": key})},
	}
	ins := Decode(objs, Options{})
	var got []string
	for _, in := range ins.List {
		s := in.ID()
		if in.Err != nil {
			s += "!"
		}
		if in.Hash == "" && in.Err == nil {
			t.Errorf("%s has no hash", in.ID())
		}
		got = append(got, s)
	}
	if want := "certificate/lonely! certificate/web service/api! service/web templates"; strings.Join(got, " ") != want {
		t.Errorf("inputs %q, want %q", strings.Join(got, " "), want)
	}
	if !ins.ServicesPresent || !ins.TemplatesPresent {
		t.Errorf("presence %+v", ins)
	}
	if n := len(ins.Errors()); n != 2 {
		t.Errorf("%d errors, want 2", n)
	}
	again := Decode(objs, Options{})
	for i := range ins.List {
		if ins.List[i].Hash != again.List[i].Hash {
			t.Errorf("%s: hash differs between two decodes of the same objects", ins.List[i].ID())
		}
	}
}

// TestAssembleChosenVersions: a snapshot from versions that are not the current ones (a held
// service at its last good text), with the current pods.
func TestAssembleChosenVersions(t *testing.T) {
	objs := &Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", map[string]string{"web": `{"namespace":"shop","selector":{"app":"web"}, "v": 2}`})},
		Pods:       []*corev1.Pod{readyPod("shop", "web-1", "10.0.0.1", map[string]string{"app": "web"})},
	}
	old := Input{Kind: KindService, Name: "web", Ref: Ref{Kind: "ConfigMap", Namespace: ns, Name: "services", Key: "web"},
		Text: `{"namespace":"shop","selector":{"app":"web"}, "v": 1}`}
	snap, err := Assemble(objs, Options{PodCache: &PodCache{}}, []Input{old})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Services) != 1 || snap.Services[0].Field("v") != int64(1) {
		t.Fatalf("services %v", snap.Services)
	}
	if pods, ok := snap.Services[0].Field("pods").(interface{ Len() int }); !ok || pods.Len() != 1 {
		t.Errorf("the held service does not have the current pods: %v", snap.Services[0].Field("pods"))
	}
	if snap.Templates != nil {
		t.Error("no templates input: want the built-in default (nil)")
	}
	if _, err := Assemble(objs, Options{ConfigSecret: "haproxy"}, nil); err == nil {
		t.Error("with --config-secret and no templates, Assemble must fail rather than use the built-in template")
	}
}

// manyServices are n services, each with one ready pod, and their inputs as Decode reads them.
func manyServices(n int) (*Objects, Inputs, Options) {
	data := make(map[string]string, n)
	objs := &Objects{}
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		data[name] = fmt.Sprintf(`{"namespace":"shop","selector":{"app":%q}}`, name)
		pod := readyPod("shop", name+"-0", fmt.Sprintf("10.1.%d.%d", i/250, i%250), map[string]string{"app": name})
		pod.ResourceVersion = "1" // kept converted by the cache between Builds
		objs.Pods = append(objs.Pods, pod)
	}
	objs.ConfigMaps = []*corev1.ConfigMap{configMap(ns, "services", data), configMap(ns, "config", map[string]string{"template": "x"})}
	opts := Options{PodCache: &PodCache{}}
	return objs, Decode(objs, opts), opts
}

// TestAssembleTakesTheServicesAsChosen: the services of a Selection's chosen inputs (sorted,
// none with an error) are read where they are: Assemble of a pod edit allocates well under a
// copy of them (1.8 MB at 10,000 services, at each sync).
func TestAssembleTakesTheServicesAsChosen(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's heap is not production's")
	}
	const n = 2000
	objs, cur, opts := manyServices(n)
	if _, err := Assemble(objs, opts, cur.List); err != nil {
		t.Fatal(err)
	}
	per := allocs.PerRun(3, func() {
		if _, err := Assemble(objs, opts, cur.List); err != nil {
			t.Fatal(err)
		}
	})
	list := uint64(n) * uint64(unsafe.Sizeof(Input{}))
	if limit := list / 4; per > limit {
		t.Errorf("Assemble of %d unchanged services allocates %d bytes, want at most %d (a quarter of a copy of their inputs, %d)", n, per, limit, list)
	}
	t.Logf("Assemble of %d unchanged services: %d bytes (a copy of their inputs: %d)", n, per, list)
}

// TestAssembleAnyChosenOrder: chosen inputs out of order, or with a service that has an
// error among them, give the snapshot sorted ones give (the error's service left out); chosen
// is never changed.
func TestAssembleAnyChosenOrder(t *testing.T) {
	objs, cur, _ := manyServices(5)
	names := func(chosen []Input) string {
		before := slices.Clone(chosen)
		snap, err := Assemble(objs, Options{PodCache: &PodCache{}}, chosen)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(chosen, before) {
			t.Error("Assemble changed chosen")
		}
		var out []string
		for _, s := range snap.Services {
			out = append(out, s.Field("name").(string))
		}
		return strings.Join(out, " ")
	}
	const all = "svc-00000 svc-00001 svc-00002 svc-00003 svc-00004"
	if got := names(cur.List); got != all {
		t.Fatalf("sorted: %q", got)
	}
	reversed := slices.Clone(cur.List)
	slices.Reverse(reversed)
	bad := slices.Clone(cur.List)
	bad[2].Err = &InputError{Stage: StageDecode, Ref: bad[2].Ref, Err: errors.New("bad")}
	twice := slices.Insert(slices.Clone(cur.List), 1, cur.List[0])
	for name, tc := range map[string]struct {
		chosen []Input
		want   string
	}{
		"reversed":              {reversed, all},
		"an error among them":   {bad, "svc-00000 svc-00001 svc-00003 svc-00004"},
		"a service given twice": {twice, "svc-00000 svc-00000 svc-00001 svc-00002 svc-00003 svc-00004"},
	} {
		if got := names(tc.chosen); got != tc.want {
			t.Errorf("%s: services %q, want %q", name, got, tc.want)
		}
	}
}
