package snapshot

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
