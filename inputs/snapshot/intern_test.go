package snapshot

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestSharedListCostsNothing: a list the interner knows (the conditions or container statuses
// of a ReplicaSet's pods) is given back box and all: boxing it again would cost each pod 24
// bytes a list.
func TestSharedListCostsNothing(t *testing.T) {
	var in interner
	elems := []any{"Ready", "True"}
	h := hashString("Ready") ^ hashString("True")
	first := in.slice(elems, h, true)
	var again any
	if n := testing.AllocsPerRun(100, func() { again = in.slice(elems, h, true) }); n != 0 {
		t.Errorf("a known list takes %v allocations, want 0", n)
	}
	if a, b := first.([]any), again.([]any); len(b) != 2 || &a[0] != &b[0] {
		t.Errorf("the list is not shared: %v, %v", a, b)
	}
	if own := in.slice(elems, h, false); &own.([]any)[0] == &first.([]any)[0] {
		t.Error("a list that is not canonical was shared")
	}
}

// TestPodsShareTheirNamespace: a converted pod holds its namespace as the records do, one
// string for every pod of the namespace, not the copy each decoded pod brings.
func TestPodsShareTheirNamespace(t *testing.T) {
	var c PodConverter
	lbls := map[string]string{"app": "web"}
	a := c.Convert(readyPod(strings.Clone("shop"), "web-1", "10.1.0.1", lbls))
	b := c.Convert(readyPod(strings.Clone("shop"), "web-2", "10.1.0.2", lbls))
	waiting := readyPod(strings.Clone("shop"), "web-3", "10.1.0.3", lbls)
	waiting.Status.ContainerStatuses[0].Ready = false
	w := c.Convert(waiting)
	if a.Namespace() != "shop" || w.Ready() {
		t.Fatalf("namespace %q, ready %v", a.Namespace(), w.Ready())
	}
	if unsafe.StringData(a.Namespace()) != unsafe.StringData(b.Namespace()) || unsafe.StringData(a.Namespace()) != unsafe.StringData(w.Namespace()) {
		t.Error("each pod holds its own copy of its namespace")
	}
}

// TestInternerTableBounded: the table holds the nodes of the last conversions, not every
// node converted since the caller's last round (rotate): 200,000 distinct lists, no rotate,
// leave at most two rounds of each shard; a list in use, asked for all along, stays shared.
func TestInternerTableBounded(t *testing.T) {
	var in interner
	hot := []any{"Ready", "True"}
	hh := hashString("Ready") ^ hashString("True")
	first := in.slice(hot, hh, true)
	for i := range 200_000 {
		s := strconv.Itoa(i)
		in.slice([]any{s}, hashString(s), true)
		if i%1000 == 0 {
			if again := in.slice(hot, hh, true); &again.([]any)[0] != &first.([]any)[0] {
				t.Fatalf("after %d lists, the list in use is no longer shared", i)
			}
		}
	}
	if n, most := in.len(), 2*shardRound*len(in.shards); n > most {
		t.Errorf("the table holds %d nodes, want at most %d", n, most)
	}
}
