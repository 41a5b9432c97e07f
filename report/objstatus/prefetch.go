package objstatus

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A round that writes many objects of one kind in one namespace (the status of every route at
// start) reads them with a list, 500 a page, instead of one read each: each write is then one
// request instead of two, which halves the time the round takes within --kube-qps (3,000
// routes at 50 requests a second: 60 s instead of 120).
const (
	prefetchMin  = 16  // the objects of a kind and namespace from which they are listed
	prefetchPage = 500 // the objects a list request returns at most (Writer.page)
)

// prefetched holds, for each kind and namespace whose objects a round lists, the page listed
// last, until each of its objects is written (taken once: a write that conflicts reads the
// object again). A page is listed when the round reaches it: the round writes in the order the
// API server lists (compareObjects: by name within a kind and namespace), so it holds one page
// of each group at a time, not every object it writes (10,000 Ingresses listed at once were
// all held, typed, until each was written: minutes within --kube-qps).
type prefetched struct {
	w      *Writer
	groups map[Object]*pages // Kind and Namespace -> its pages
}

// pages are the objects of one kind and namespace a round lists, a page at a time.
type pages struct {
	group   Object          // Kind and Namespace
	want    map[string]bool // the names of the objects the round may write (nil: a list failed)
	page    map[string]any  // those of the page listed last, not taken yet
	first   string          // the name of the page's first object
	last    string          // the name of the last object listed
	from    string          // the continue token the page was listed with ("": the first page)
	cont    string          // the list's continue token
	started bool            // a page was listed
	done    bool            // no more pages
}

// take returns o as listed, listing the pages up to its name, and forgets it; nil when it was
// not listed (not in a listed group, gone, or behind the page listed last).
func (p *prefetched) take(ctx context.Context, o Object) any {
	if p == nil {
		return nil
	}
	g := p.groups[Object{Kind: o.Kind, Namespace: o.Namespace}]
	if g == nil || !g.want[o.Name] {
		return nil
	}
	for {
		if v, ok := g.page[o.Name]; ok {
			delete(g.page, o.Name)
			return v
		}
		if g.started && o.Name < g.first && g.from != "" {
			// Behind the page: the objects the last rendering changed were written first,
			// the rest start from the first page again.
			g.cont, g.started, g.done = "", false, false
		}
		if g.done || g.started && o.Name <= g.last {
			return nil
		}
		p.w.nextPage(ctx, g)
	}
}

// held is how many listed objects are kept, for tests.
func (p *prefetched) held() int {
	if p == nil {
		return 0
	}
	n := 0
	for _, g := range p.groups {
		n += len(g.page)
	}
	return n
}

// nextPage lists g's next page in place of the one before: the objects the round did not take
// from that one are read one by one if it comes back to them.
func (w *Writer) nextPage(ctx context.Context, g *pages) {
	g.page, g.first = map[string]any{}, ""
	cont, last, err := w.listPage(ctx, g.group, g.cont, func(name string, obj any) {
		if g.first == "" {
			g.first = name
		}
		if g.want[name] {
			g.page[name] = obj
		}
	})
	if err != nil {
		w.log.Debug("could not list the objects to write; each is read", "kind", g.group.Kind, "namespace", g.group.Namespace, "error", err)
		g.want, g.page = nil, nil // each object is read from now on
		return
	}
	g.started, g.from, g.cont, g.done = true, g.cont, cont, cont == ""
	if last != "" {
		g.last = last
	}
}

// prefetch notes the namespaces that hold at least prefetchMin of the objects todo of one
// kind: their objects are listed, a page at a time, as the round reaches them (take).
func (w *Writer) prefetch(todo []Object) *prefetched {
	out := &prefetched{w: w, groups: map[Object]*pages{}}
	for _, o := range todo {
		if o.Namespace == "" || o.Kind == KindGatewayClass {
			continue
		}
		g := Object{Kind: o.Kind, Namespace: o.Namespace}
		if out.groups[g] == nil {
			out.groups[g] = &pages{group: g, want: map[string]bool{}}
		}
		out.groups[g].want[o.Name] = true
	}
	for g, p := range out.groups {
		if len(p.want) < prefetchMin {
			delete(out.groups, g)
		}
	}
	return out
}

// listPage calls keep with each object of one page (w.page objects from cont) of kind
// g.Kind in namespace g.Namespace, without its managedFields (an update without them leaves
// them as they are); next is the continue token of the page after ("": none), last the name
// of the page's last object.
func (w *Writer) listPage(ctx context.Context, g Object, cont string, keep func(name string, obj any)) (next, last string, err error) {
	opts := metav1.ListOptions{Limit: w.page, Continue: cont}
	switch g.Kind {
	case KindIngress:
		l, err := w.cfg.Client.NetworkingV1().Ingresses(g.Namespace).List(ctx, opts)
		if err != nil {
			return "", "", fmt.Errorf("list the Ingresses of %s: %w", g.Namespace, err)
		}
		for i := range l.Items {
			ing := &l.Items[i]
			ing.ManagedFields = nil
			keep(ing.Name, ing)
			last = ing.Name
		}
		return l.Continue, last, nil
	default:
		gvr, ok := resources[g.Kind]
		if !ok || w.cfg.Dynamic == nil {
			return "", "", nil
		}
		l, err := w.cfg.Dynamic.Resource(gvr).Namespace(g.Namespace).List(ctx, opts)
		if err != nil {
			return "", "", fmt.Errorf("list the %s of %s: %w", gvr.Resource, g.Namespace, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
			keep(u.GetName(), u)
			last = u.GetName()
		}
		return l.GetContinue(), last, nil
	}
}

// listedIngress is o as listed this round, if it was.
func (w *Writer) listedIngress(ctx context.Context, o Object) *networkingv1.Ingress {
	ing, _ := w.pre.take(ctx, o).(*networkingv1.Ingress)
	return ing
}

// listedUnstructured is o as listed this round, if it was.
func (w *Writer) listedUnstructured(ctx context.Context, o Object) *unstructured.Unstructured {
	u, _ := w.pre.take(ctx, o).(*unstructured.Unstructured)
	return u
}
