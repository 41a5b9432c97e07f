package render

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
)

// manyServices is a snapshot of n small services rendered by a template that reads their
// list.
func manyServices(n int) *snapshot.Snapshot {
	s := testSnapshot(map[string]string{"template": `{{ services|length }} {{ services[0].name }}`}, "template")
	keys := record.NewKeys("name")
	s.Services = make([]*record.Record, n)
	for i := range s.Services {
		s.Services[i] = record.New(keys, []any{fmt.Sprintf("svc-%d", i)})
	}
	return s
}

// TestRenderReusesServicesList: a render whose services are the last render's records (the
// same snapshot, or another with the same services) gives templates the very list the last
// one had, not a copy (160 KB at 10,000 services); another record gives a new list, and the
// list given before is left as it was (a render may still read it).
func TestRenderReusesServicesList(t *testing.T) {
	s := manyServices(10_000)
	r := New(Options{SSLDir: "/ssl"})
	list := func(s *snapshot.Snapshot) []any { return r.context(s, nil)["services"].([]any) }
	first := list(s)
	if second := list(s); unsafe.SliceData(second) != unsafe.SliceData(first) {
		t.Error("the same snapshot rendered twice: two lists")
	}
	same := *s
	same.Services = append([]*record.Record(nil), s.Services...)
	if got := list(&same); unsafe.SliceData(got) != unsafe.SliceData(first) {
		t.Error("a snapshot of the same services: a new list")
	}
	other := same
	other.Services = append([]*record.Record(nil), s.Services...)
	other.Services[5] = record.New(record.NewKeys("name"), []any{"new"})
	got := list(&other)
	if unsafe.SliceData(got) == unsafe.SliceData(first) || got[5] != any(other.Services[5]) || first[5] != any(s.Services[5]) {
		t.Error("a changed service: not a new list holding it, or the last list changed")
	}

	if _, err := r.Render(context.Background(), s); err != nil { // compiled, and the list made
		t.Fatal(err)
	}
	per := allocs.PerRun(10, func() {
		if _, err := r.Render(context.Background(), s); err != nil {
			t.Error(err)
		}
	})
	if per > 64<<10 {
		t.Errorf("a render of the same 10,000 services allocates %d bytes: the list is copied (160 KB)", per)
	}
	t.Logf("%d bytes a render", per)
}
