package render

import (
	"bytes"
	"context"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestApartLeavesTheSyncsModules: renders with a renderer made by Apart (the templates'
// tests, each with objects of its own) leave the renderer of the syncs the modules of its
// last render: rendering the same objects again reuses its routes module, and renders what a
// fresh renderer does; the renderer apart renders what a fresh one does too.
func TestApartLeavesTheSyncsModules(t *testing.T) {
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	tpl := loadConfigMapData(t, "../examples/templates/httproute.yaml")
	snapOf := func(n int) *snapshot.Snapshot {
		snap := assembleWatched(t, httprouteObjects(n), httprouteWatch...)
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		return snap
	}
	fresh := func(snap *snapshot.Snapshot) []byte {
		b, err := New(opts).Render(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		return b.Config
	}
	syncs := New(opts)
	sync, test := snapOf(20), snapOf(25)
	if _, err := syncs.Render(context.Background(), sync); err != nil {
		t.Fatal(err)
	}
	apart := syncs.Apart()
	got, err := apart.Render(context.Background(), test)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Config, fresh(test)) {
		t.Error("the renderer apart renders otherwise than a fresh one")
	}
	before := syncs.kept.Reused()
	again, err := syncs.Render(context.Background(), snapOf(20))
	if err != nil {
		t.Fatal(err)
	}
	if syncs.kept.Reused() == before {
		t.Error("the syncs' renderer computed its modules again after a render apart")
	}
	if !bytes.Equal(again.Config, fresh(sync)) {
		t.Error("the syncs' renderer renders otherwise than a fresh one after a render apart")
	}
}
