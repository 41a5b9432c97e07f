package watcher

import (
	"strings"
	"testing"
)

func TestDecodeManifests(t *testing.T) {
	objs, err := DecodeManifests("test.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services}\ndata: {web: '{}'}\n---\n"+
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\nstatus: {podIP: 10.0.0.1}\n"), "lb", nil)
	if err != nil || len(objs.ConfigMaps) != 1 || objs.ConfigMaps[0].Namespace != "lb" || len(objs.Pods)+len(objs.ConvertedPods) != 1 {
		t.Fatalf("%+v, %v", objs, err)
	}
	if _, err := DecodeManifests("bad.yaml", []byte("kind: Pod\nmetadata: [unclosed\n"), "lb", nil); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("a manifest that does not parse: %v", err)
	}
}
