package snapshot

import (
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Object is one object of a watched resource (--watch) as templates see it: what `kubectl get
// -o json` shows, without managedFields, as a read-only record whose equal parts are shared with
// the other objects an ObjectConverter made. It may be shared by any number of Objects and
// Snapshots.
type Object struct {
	key   string // "namespace/name", or "name" for a cluster-scoped object
	slash int    // the index of the "/" in key; -1 for a cluster-scoped object
	obj   *record.Record
	// cluster is the object's cluster with several clusters (ObjectConverter.InCluster).
	cluster string
}

// Namespace is the object's namespace; "" for a cluster-scoped object.
func (o *Object) Namespace() string {
	if o.slash < 0 {
		return ""
	}
	return o.key[:o.slash]
}

// Name is the object's name.
func (o *Object) Name() string { return o.key[o.slash+1:] }

// Key is how templates look the object up by name: "namespace/name", or "name" for a
// cluster-scoped object.
func (o *Object) Key() string { return o.key }

// Record is the object as templates see it. Read-only.
func (o *Object) Record() *record.Record { return o.obj }

// Kind is the object's kind.
func (o *Object) Kind() string {
	k, _ := o.obj.Get("kind")
	s, _ := k.(string)
	return s
}

// APIVersion is the object's apiVersion.
func (o *Object) APIVersion() string {
	v, _ := o.obj.Get("apiVersion")
	s, _ := v.(string)
	return s
}

// UID is the object's metadata.uid ("" when it has none): Events name it, so that `kubectl
// describe` shows them.
func (o *Object) UID() string {
	s, _ := o.metaField("uid").(string)
	return s
}

// ResourceVersion is the object's metadata.resourceVersion ("" when it has none).
func (o *Object) ResourceVersion() string {
	s, _ := o.metaField("resourceVersion").(string)
	return s
}

func (o *Object) metaField(name string) any {
	m, _ := o.obj.Get("metadata")
	r, _ := m.(*record.Record)
	v, _ := r.Get(name)
	return v
}

// Labels are the object's labels, for label selectors.
func (o *Object) Labels() RecordLabels {
	r, _ := o.metaField("labels").(*record.Record)
	return RecordLabels{r}
}

// RecordLabels reads a labels record as labels.Labels.
type RecordLabels struct{ r *record.Record }

var _ labels.Labels = RecordLabels{}

func (l RecordLabels) Has(k string) bool { _, ok := l.Lookup(k); return ok }
func (l RecordLabels) Get(k string) string {
	v, _ := l.Lookup(k)
	return v
}
func (l RecordLabels) Lookup(k string) (string, bool) {
	v, ok := l.r.Get(k)
	s, isStr := v.(string)
	return s, ok && isStr
}

// newObject makes the Object of a converted record.
func newObject(obj *record.Record) (*Object, error) {
	m, _ := obj.Get("metadata")
	meta, _ := m.(*record.Record)
	name, _ := meta.Get("name")
	ns, _ := meta.Get("namespace")
	n, _ := name.(string)
	s, _ := ns.(string)
	if n == "" {
		return nil, fmt.Errorf("the object has no metadata.name")
	}
	if s == "" {
		return &Object{key: n, slash: -1, obj: obj}, nil
	}
	return &Object{key: s + "/" + n, slash: len(s), obj: obj}, nil
}

// ObjectConverter converts the objects of watched resources into Objects, sharing the parts
// that are equal between objects (labels, ports, conditions, ...) and the strings many objects
// repeat, as PodConverter does for pods. Use one per source; the zero value is ready; it is
// safe for concurrent use.
type ObjectConverter struct {
	in       interner
	shapes   shapeTable // the key lists of the maps of unstructured objects
	clusters clusterShapes
}

// NextRound tells the converter that a new batch starts (a new read of the source): the parts
// no object of this batch or the last one used are no longer offered for sharing.
func (c *ObjectConverter) NextRound() { c.in.rotate() }

// FromTyped converts a typed object (a *networkingv1.Ingress, ...) whose apiVersion and kind
// are gvk. obj is not changed and not kept.
func (c *ObjectConverter) FromTyped(obj kruntime.Object, gvk schema.GroupVersionKind) (*Object, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("convert %T: not a pointer to a struct", obj)
	}
	// A shallow copy without managedFields: the original is the caller's.
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	if m, err := meta.Accessor(cp.Interface()); err == nil {
		m.SetManagedFields(nil)
	}
	apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
	rec, err := toUnstructured(cp.Interface(), &c.in, nil, kv{k: "apiVersion", v: c.in.str(apiVersion, hashString(apiVersion))},
		kv{k: "kind", v: c.in.str(kind, hashString(kind))})
	if err != nil {
		// A type the plan cannot convert exactly: ToUnstructured's own result.
		u, uerr := kruntime.DefaultUnstructuredConverter.ToUnstructured(cp.Interface())
		if uerr != nil {
			return nil, fmt.Errorf("convert %s: %w", kind, uerr)
		}
		u["apiVersion"], u["kind"] = apiVersion, kind
		return c.FromUnstructured(u)
	}
	return newObject(rec)
}

// FromUnstructured converts an object as JSON decodes it (map[string]any of string, int64,
// float64, bool, nil, []any and maps: what k8s.io/apimachinery's unstructured types hold),
// without its managedFields. u is not changed; its maps and lists are not kept (its strings
// are: the Object shares them).
func (c *ObjectConverter) FromUnstructured(u map[string]any) (*Object, error) {
	out, err := c.convert(u, true)
	if err != nil {
		return nil, err
	}
	rec, ok := out.(*record.Record)
	if !ok {
		return nil, fmt.Errorf("the object is not a JSON object")
	}
	return newObject(rec)
}

// FromPlain converts a decoded JSON value that is not a Kubernetes object (a service entry):
// as FromUnstructured converts an object, its maps records at any depth and its equal parts
// shared, but with every key kept (no managedFields dropped) and only the value itself its
// own (never shared). v is not changed; its maps and lists are not kept. A nil converter
// shares nothing (each record has its own key list).
func (c *ObjectConverter) FromPlain(v any) (any, error) { return c.convert(v, false) }

// convert converts v, a Kubernetes object when object.
func (c *ObjectConverter) convert(v any, object bool) (any, error) {
	st := statePool.Get().(*convState)
	defer func() {
		st.in, st.last, st.lastBox = nil, "", nil
		statePool.Put(st)
	}()
	st.in = nil
	if c != nil {
		st.in = &c.in
	}
	st.object = object
	st.pairs, st.elems = st.pairs[:0], st.elems[:0]
	st.last, st.lastBox = "", nil
	out, _, _, err := c.plain(st, v, 0, "")
	return out, err
}

// uniqueKeys are keys whose values are (nearly) always one object's own: a map (or struct)
// holding one, or a list under one, is never looked up for sharing (it would only fill the
// table). (Not "uid": the owner references of the pods of one ReplicaSet are equal.)
var uniqueKeys = map[string]bool{"resourceVersion": true, "selfLink": true,
	"ip": true, "podIP": true, "podIPs": true, "address": true, "addresses": true}

// plain converts one JSON value v at depth (0: the object itself) under key. The object, its
// metadata and its status (of a Kubernetes object: st.object) are the object's own (never
// looked up for sharing): their strings that objects repeat are shared one by one. A map or
// list deeper down is shared whole when an equal one is known. Scalars keep the interface
// value they came in (no new box).
func (c *ObjectConverter) plain(st *convState, v any, depth int, key string) (out any, h uint64, canon bool, err error) {
	switch x := v.(type) {
	case nil:
		return nil, tagNil, true, nil
	case string:
		// The same string as the one just before (status.podIP, then status.podIPs[0].ip)
		// shares its box and bytes.
		if st.lastBox != nil && st.last == x {
			return st.lastBox, hashString(x), true, nil
		}
		st.last, st.lastBox = x, v
		return v, hashString(x), true, nil
	case bool, int64, float64:
		h, _ := hashScalar(v)
		return v, h, true, nil
	case int:
		return c.plain(st, int64(x), depth, key)
	case int32:
		return c.plain(st, int64(x), depth, key)
	case float32:
		return c.plain(st, float64(x), depth, key)
	case []any:
		if x == nil {
			return nil, tagNil, true, nil
		}
		base := len(st.elems)
		h, canon := tagSlice, true
		for _, e := range x {
			ce, he, cc, err := c.plain(st, e, depth+1, "")
			if err != nil {
				clear(st.elems[base:])
				st.elems = st.elems[:base]
				return nil, 0, false, err
			}
			st.elems = append(st.elems, ce)
			h = mix(h*0x100000001b3 + he)
			canon = canon && cc
		}
		h = mix(h ^ uint64(len(x)))
		if uniqueKeys[key] {
			canon = false
		}
		out := st.in.slice(st.elems[base:], h, canon)
		clear(st.elems[base:])
		st.elems = st.elems[:base]
		return out, h, canon, nil
	case map[string]any:
		if x == nil {
			return nil, tagNil, true, nil
		}
		own := depth == 0 || (st.object && depth == 1 && (key == "metadata" || key == "status"))
		base := len(st.pairs)
		var sum uint64
		canon := true
		for k, e := range x {
			if own && st.object && k == "managedFields" {
				continue // often most of an object, and nobody templates it
			}
			ce, he, cc, err := c.plain(st, e, depth+1, k)
			if err != nil {
				clear(st.pairs[base:])
				st.pairs = st.pairs[:base]
				return nil, 0, false, err
			}
			if s, ok := ce.(string); ok && own && !uniqueStrings[k] {
				ce = st.in.str(s, he)
			}
			hk := hashString(k)
			st.pairs = append(st.pairs, kv{k: k, hk: hk, v: ce, hv: he})
			sum += pairHash(hk, he)
			canon = canon && cc && !uniqueKeys[k]
		}
		n := len(st.pairs) - base
		h := mapHash(sum, n)
		pairs := sortPairs(st.pairs[base:])
		// Labels and annotations are keyed by data: their key lists are their own (the record
		// is shared whole when equal). Other maps are keyed by their schema.
		mk := c.makeRecord
		if key == "labels" || key == "annotations" {
			mk = ownKeys
		}
		var rec *record.Record
		if own {
			rec, canon = mk(pairs), false
		} else {
			rec = st.in.mapWith(pairs, h, canon, mk)
		}
		clear(st.pairs[base:])
		st.pairs = st.pairs[:base]
		return rec, h, canon, nil
	}
	return nil, 0, false, fmt.Errorf("a value of type %T is not JSON", v)
}

// makeRecord makes the record of sorted pairs with a shared key list.
func (c *ObjectConverter) makeRecord(pairs []kv) *record.Record {
	var buf [24]string
	var t *shapeTable // a nil converter's: none
	if c != nil {
		t = &c.shapes
	}
	return withKeys(t.keys(pairNames(buf[:0], pairs)), pairs)
}

// ownKeys makes the record of sorted pairs with a key list of its own.
func ownKeys(pairs []kv) *record.Record { return newRecord(pairs, nil) }

// maxShapes bounds the key lists a shapeTable keeps: key lists are never forgotten, and a
// resource whose maps are keyed by data (a ConfigMap's data) must not grow the table without
// end. Past it, new key lists are not shared.
const maxShapes = 8192

// shapeTable shares key lists, as record.Shapes does, up to maxShapes of them. A nil table
// shares none.
type shapeTable struct {
	mu sync.Mutex
	m  map[uint64][]shapeEntry
	n  int
}

type shapeEntry struct {
	names []string
	keys  *record.Keys
}

func (t *shapeTable) keys(names []string) *record.Keys {
	if t == nil {
		return record.NewKeys(names...)
	}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	for _, n := range names {
		h.WriteString(n)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.m[sum] {
		if slices.Equal(e.names, names) {
			return e.keys
		}
	}
	k := record.NewKeys(names...)
	if t.n < maxShapes {
		if t.m == nil {
			t.m = map[uint64][]shapeEntry{}
		}
		t.m[sum] = append(t.m[sum], shapeEntry{slices.Clone(names), k})
		t.n++
	}
	return k
}

// WithStatus is o with only the fields of its status that keep says templates see (o itself
// when that is all of them or it has none; no status when none is left): --watch
// ...;status=FIELD,... or status=off (keep says no to every field).
func (o *Object) WithStatus(keep func(field string) bool) *Object {
	st, ok := o.obj.Get("status")
	if !ok {
		return o
	}
	var kept *record.Record
	if r, ok := st.(*record.Record); ok {
		var keys []string
		var vals []any
		for k, v := range r.All() {
			if keep(k) {
				keys, vals = append(keys, k), append(vals, v)
			}
		}
		switch len(keys) {
		case r.Len():
			return o
		case 0:
		default:
			kept = record.FromPairs(nil, keys, vals)
		}
	}
	keys := make([]string, 0, o.obj.Len())
	vals := make([]any, 0, o.obj.Len())
	for k, v := range o.obj.All() {
		switch {
		case k != "status":
			keys, vals = append(keys, k), append(vals, v)
		case kept != nil:
			keys, vals = append(keys, k), append(vals, any(kept))
		}
	}
	return &Object{key: o.key, slash: o.slash, obj: record.FromPairs(nil, keys, vals)}
}

// SameExceptVersion reports whether a and b hold the same values, their
// metadata.resourceVersion aside: an update that changes nothing templates see (a status
// write, for a resource whose status they do not see).
func SameExceptVersion(a, b *Object) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.key == b.key && sameValue(a.obj, b.obj, 0, "")
}

// Echo is cur as old holds it when the two differ in nothing but their
// metadata.resourceVersion (the echo of a status write on a resource whose status templates
// do not see, a relist): old's values, old's metadata but for cur's resourceVersion (old
// itself when that is the same too). The renderer finds by identity what it
// computed from old's parts (the blocks of routes it keeps), rather than comparing 3,000
// equal specs again after the status writer's wave (issue 25). Otherwise cur.
func Echo(old, cur *Object) *Object {
	if old == nil || cur == nil || !SameExceptVersion(old, cur) {
		return cur
	}
	om, _ := old.obj.Get("metadata")
	cm, _ := cur.obj.Get("metadata")
	meta, ok1 := om.(*record.Record)
	curMeta, ok2 := cm.(*record.Record)
	if !ok1 || !ok2 {
		return cur
	}
	now, has := curMeta.Get("resourceVersion")
	if was, had := meta.Get("resourceVersion"); had == has && reflect.DeepEqual(was, now) {
		return old
	}
	meta = meta.Patched([]record.Change{{Key: "resourceVersion", Value: now, Remove: !has}})
	e := *old
	e.obj = old.obj.Patched([]record.Change{{Key: "metadata", Value: meta}})
	return &e
}

// sameValue compares two values of converted objects; key is the key v sits under, at depth
// (0: the object).
func sameValue(a, b any, depth int, key string) bool {
	switch x := a.(type) {
	case *record.Record:
		y, ok := b.(*record.Record)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		skip := depth == 1 && key == "metadata" // its resourceVersion
		n := 0
		for k, v := range x.All() {
			if skip && k == "resourceVersion" {
				continue
			}
			w, ok := y.Get(k)
			if !ok || !sameValue(v, w, depth+1, k) {
				return false
			}
			n++
		}
		m := y.Len()
		if _, ok := y.Get("resourceVersion"); ok && skip {
			m--
		}
		return n == m
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i], depth+1, "") {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
