package candidate

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// slowRenderer prints the template as the configuration; a template saying "slow" renders
// only once released, one saying "runaway" runs until its budget error.
type slowRenderer struct {
	release chan struct{}
	renders atomic.Int32 // of templates saying slow or runaway
}

func (r *slowRenderer) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	text := s.Templates[s.TemplateKey]
	switch {
	case strings.Contains(text, "slow"):
		r.renders.Add(1)
		select {
		case <-r.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case strings.Contains(text, "runaway"):
		r.renders.Add(1)
		ref := s.TemplateRef
		ref.Key = s.TemplateKey
		return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref, Err: errors.New("the template ran past its time budget of 1s")}
	}
	b := &render.Bundle{Config: []byte(text + "\n" + strings.Join(serviceNames(s), " ") + "\n")}
	b.Hash = b.Content().Hash()
	return b, nil
}

func serviceNames(s *snapshot.Snapshot) []string {
	var out []string
	for _, svc := range s.Services {
		out = append(out, svc.Field("name").(string))
	}
	slices.Sort(out)
	return out
}

func objects(template string, services ...string) *snapshot.Objects {
	data := map[string]string{}
	for _, name := range services {
		data[name] = `{"namespace": "web", "selector": {"app": "` + name + `"}}`
	}
	return &snapshot.Objects{ConfigMaps: []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"}, Data: data},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "config"}, Data: map[string]string{"template": template}},
	}}
}

// trialBuilder is a Builder that tries changed template sets apart, and the trials it heard of.
func trialBuilder(t *testing.T, r Renderer) (*Builder, chan error) {
	t.Helper()
	dir := t.TempDir()
	store, err := generation.Open(filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "certs"), filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	tried := make(chan error, 8)
	b := New(Config{Inputs: snapshot.Builder{}, Renderer: r, Store: store,
		Tried: func(_ string, _ time.Duration, err error) { tried <- err }})
	t.Cleanup(b.StopTrial)
	return b, tried
}

// oneSync is one sync's Make, accepting what it made as the pipeline does when it goes live.
func oneSync(t *testing.T, b *Builder, q *quarantine.State, objs *snapshot.Objects) Made {
	t.Helper()
	cur := b.Decode(objs)
	m := b.Make(context.Background(), objs, cur, q, nil, false)
	if m.Err != nil {
		t.Fatalf("make: %v", m.Err)
	}
	q.Held = m.Held
	q.Accept(m.Candidate.Chosen, cur)
	b.Accept(m.Candidate)
	return m
}

func config(m Made) string { return string(m.Candidate.Bundle.Config) }

// TestASlowTemplateHoldsUpNothing: while a changed template set renders apart, the syncs go
// on with the last good one (a new service goes live); once it rendered, the next sync takes it.
func TestASlowTemplateHoldsUpNothing(t *testing.T) {
	r := &slowRenderer{release: make(chan struct{})}
	b, tried := trialBuilder(t, r)
	var q quarantine.State
	oneSync(t, b, &q, objects("v1", "web"))

	m := oneSync(t, b, &q, objects("v2 slow", "web"))
	if config(m) != "v1\nweb\n" {
		t.Fatalf("while the new template is tried: %q, want the last good one", config(m))
	}
	m = oneSync(t, b, &q, objects("v2 slow", "web", "api"))
	if config(m) != "v1\napi web\n" {
		t.Fatalf("a new service while the template is tried: %q", config(m))
	}
	if len(m.Held) != 0 {
		t.Errorf("held while tried: %v", m.Held)
	}
	close(r.release)
	if err := <-tried; err != nil {
		t.Fatalf("the trial: %v", err)
	}
	if m = oneSync(t, b, &q, objects("v2 slow", "web", "api")); config(m) != "v2 slow\napi web\n" {
		t.Errorf("after the trial: %q, want the new template", config(m))
	}
	if n := r.renders.Load(); n != 3 {
		t.Errorf("%d renderings of the new template: want two trials (a service was added during the first) and the sync's after them", n)
	}
}

// TestARunawayTemplateIsHeldByItsTrial: a template whose trial fails in the template is held at
// the last good version without rendering again, until it or another input changes.
func TestARunawayTemplateIsHeldByItsTrial(t *testing.T) {
	r := &slowRenderer{}
	b, tried := trialBuilder(t, r)
	var q quarantine.State
	oneSync(t, b, &q, objects("v1", "web"))

	oneSync(t, b, &q, objects("runaway", "web"))
	if err := <-tried; err == nil {
		t.Fatal("the runaway template's trial passed")
	}
	for i := range 3 {
		m := oneSync(t, b, &q, objects("runaway", "web"))
		h, held := m.Held[snapshot.KindTemplates]
		if !held || !h.Kept || !strings.Contains(h.Reason(), "time budget") || config(m) != "v1\nweb\n" {
			t.Fatalf("sync %d: held %v (%q), config %q", i, held, h.Reason(), config(m))
		}
	}
	if n := r.renders.Load(); n != 1 {
		t.Errorf("the runaway template rendered %d times: want its trial only", n)
	}
	// Another input changed: the template is tried again (apart), the service goes live.
	if m := oneSync(t, b, &q, objects("runaway", "web", "api")); config(m) != "v1\napi web\n" {
		t.Errorf("a new service: %q", config(m))
	}
	<-tried
	// Tried again with the new service (apart; and in the sync too when the trial ended before
	// the sync looked: with two changes, the sync searches which is at fault).
	if n := r.renders.Load(); n < 2 {
		t.Errorf("%d renderings: want a second trial with the new service", n)
	}
}

// TestATrialBlamesNoTemplateBesideOtherChanges: when a service changed with the template, a
// failed trial blames no one; the sync searches which is at fault.
func TestATrialBlamesNoTemplateBesideOtherChanges(t *testing.T) {
	r := &slowRenderer{}
	b, tried := trialBuilder(t, r)
	var q quarantine.State
	oneSync(t, b, &q, objects("v1", "web"))
	cur := b.Decode(objects("runaway", "web", "api"))
	b.Make(context.Background(), objects("runaway", "web", "api"), cur, &q, nil, false)
	<-tried
	m := b.Make(context.Background(), objects("runaway", "web", "api"), cur, &q, nil, false)
	h, held := m.Held[snapshot.KindTemplates]
	if !held || m.Candidate == nil || config(m) != "v1\napi web\n" {
		t.Fatalf("held %v, err %v", held, m.Err)
	}
	if _, svcHeld := m.Held["service/api"]; svcHeld || !strings.Contains(h.Reason(), "time budget") {
		t.Errorf("the search blamed %v", m.Held)
	}
	if n := r.renders.Load(); n < 2 {
		t.Errorf("%d renderings: the sync searched without rendering the template", n)
	}
}
