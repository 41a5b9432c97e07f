package snapshot

import (
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// interner shares equal maps and slices between the pods it converts: the labels of the pods
// of one ReplicaSet, their containers, conditions and container statuses are built once. A
// node is shared only when its children are shared nodes or scalars, so that comparing two
// candidates is shallow (children by identity).
//
// Entries live for two rounds (see rotate): a node that no conversion asked for during the
// last two rounds is forgotten by the table (the pods that use it keep it), so the table does
// not keep the parts of deleted pods alive. A shard also starts a round of its own once it has
// shardRound new nodes: the table holds the nodes of the last conversions, not of every object
// converted since the caller's last round (at 10,000 Ingresses, their Services and
// EndpointSlices, the nodes of 40,000 conversions, each unique to its object: 4.6 MB, kept).
// Safe for concurrent use; a nil *interner shares nothing.
type interner struct {
	shards [64]internShard
}

type internShard struct {
	mu   sync.Mutex
	cur  map[uint64]any   // hash -> *record.Record, []any, a string or a *record.Keys
	prev map[uint64]any   // the previous round's
	more map[uint64][]any // further nodes whose hash is taken in cur (rare)
}

// shardRound is the number of nodes a shard's round holds at most: with 64 shards, the table
// holds 8,192 to 16,384 nodes, under 1 MB (512 a round: 3 MB, the maps' slots and all). A node
// in use (the labels of a ReplicaSet's pods, a Service port) is found again well within that
// and moves to the new round, as at rotate. BenchmarkWatchedObjectMemory: Ingresses 1,383 ->
// 1,096 B each, EndpointSlices and Nodes +9 B (a few parts no longer shared), pods the same.
const shardRound = 128

func (in *interner) shard(h uint64) *internShard { return &in.shards[h>>58] }

// rotate starts a new round.
func (in *interner) rotate() {
	if in == nil {
		return
	}
	for i := range in.shards {
		s := &in.shards[i]
		s.mu.Lock()
		s.prev, s.cur, s.more = s.cur, nil, nil
		s.mu.Unlock()
	}
}

// len is the number of nodes the table holds, for tests.
func (in *interner) len() int {
	n := 0
	for i := range in.shards {
		s := &in.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.prev)
		for _, l := range s.more {
			n += len(l)
		}
		s.mu.Unlock()
	}
	return n
}

// mapOf returns a record holding pairs (any order; see sortPairs), with its key list from
// shapes (nil: its own): a shared record when canon and an equal one is known.
func (in *interner) mapOf(pairs []kv, h uint64, canon bool, shapes *record.Shapes) *record.Record {
	r, _ := in.mapOfAdded(pairs, h, canon, shapes)
	return r
}

// mapOfAdded is mapOf, reporting whether the record was added to the table (made by this
// call and shared from now on: no other object has it yet).
func (in *interner) mapOfAdded(pairs []kv, h uint64, canon bool, shapes *record.Shapes) (*record.Record, bool) {
	make := func(pairs []kv) *record.Record { return newRecord(pairs, shapes) }
	if shapes == nil && in != nil {
		// Keys that are data (label names): their list shared through the table too (the
		// labels of every Deployment: app, pod-template-hash), forgotten with the rest.
		make = func(pairs []kv) *record.Record { return withKeys(in.keys(pairs), pairs) }
	}
	return in.mapWithAdded(sortPairs(pairs), h, canon, make)
}

// keys returns a plain key list of the keys of pairs (sorted, distinct): a shared one when an
// equal one is known.
func (in *interner) keys(pairs []kv) *record.Keys {
	h := tagKeys
	for _, p := range pairs {
		h = mix(h*0x100000001b3 + p.hk)
	}
	s := in.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(c any) bool {
		k, ok := c.(*record.Keys)
		if !ok || !k.Plain() || k.Len() != len(pairs) {
			return false
		}
		for i, p := range pairs {
			if k.At(i) != p.k {
				return false
			}
		}
		return true
	}
	if c, ok := s.find(h, match); ok {
		return c.(*record.Keys)
	}
	k := keysOf(pairs, nil)
	s.add(h, k)
	return k
}

// mapWith is mapOf for pairs sorted already, with make making the record when none is shared
// (not under the shard's lock: it may look its key list up).
func (in *interner) mapWith(pairs []kv, h uint64, canon bool, make func([]kv) *record.Record) *record.Record {
	r, _ := in.mapWithAdded(pairs, h, canon, make)
	return r
}

// mapWithAdded is mapWith, reporting whether the record was added to the table.
func (in *interner) mapWithAdded(pairs []kv, h uint64, canon bool, make func([]kv) *record.Record) (*record.Record, bool) {
	if in == nil || !canon {
		return make(pairs), false
	}
	s := in.shard(h)
	match := func(c any) bool {
		r, ok := c.(*record.Record)
		if !ok || r.Len() != len(pairs) {
			return false
		}
		for i, p := range pairs {
			if r.Key(i) != p.k || !identical(r.Value(i), p.v) {
				return false
			}
		}
		return true
	}
	s.mu.Lock()
	c, ok := s.find(h, match)
	s.mu.Unlock()
	if ok {
		return c.(*record.Record), false
	}
	m := make(pairs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.find(h, match); ok {
		return c.(*record.Record), false // made meanwhile by another conversion
	}
	s.add(h, m)
	return m, true
}

// template returns keys with the values of pairs (keys' entries, in order) of the keys set in
// mask fixed, those in strs held as strings and those in recs as record pointers (see
// record.Keys.Layout): a list shared by every record of those keys and values, made the first
// time (h hashes the names, the fixed values and the masks).
func (in *interner) template(keys *record.Keys, pairs []kv, mask, strs, recs uint64, h uint64) *record.Keys {
	s := in.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(c any) bool {
		k, ok := c.(*record.Keys)
		if !ok || !k.SameNames(keys) {
			return false
		}
		for i, p := range pairs {
			v, fixed := k.FixedValue(i)
			if fixed != (mask>>i&1 != 0) || k.HoldsString(i) != (strs>>i&1 != 0) || k.HoldsRecord(i) != (recs>>i&1 != 0) ||
				fixed && !identical(v, p.v) {
				return false
			}
		}
		return true
	}
	if c, ok := s.find(h, match); ok {
		return c.(*record.Keys)
	}
	vals := make([]any, len(pairs))
	for i, p := range pairs {
		if mask>>i&1 != 0 {
			vals[i] = p.v
		}
	}
	k := keys.Layout(mask, vals, strs, recs)
	s.add(h, k)
	return k
}

// str returns s boxed in an any, the same box for equal strings (h is hashString(s)).
func (in *interner) str(s string, h uint64) any {
	b, _ := in.strAdded(s, h)
	return b
}

// strAdded is str, reporting whether the box was added to the table.
func (in *interner) strAdded(s string, h uint64) (any, bool) {
	if in == nil {
		return s, false
	}
	sh := in.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.find(h, func(c any) bool { cs, ok := c.(string); return ok && cs == s }); ok {
		return c, false
	}
	var b any = s
	sh.add(h, b)
	return b, true
}

// slice returns a slice holding elems (copied), boxed in an any: a shared one, box and all,
// when canon and an equal one is known. The box is shared too: boxing the slice again would
// cost each pod 24 bytes for each list it shares (its conditions, its container statuses).
func (in *interner) slice(elems []any, h uint64, canon bool) any {
	l, _ := in.sliceAdded(elems, h, canon)
	return l
}

// sliceAdded is slice, reporting whether the list was added to the table.
func (in *interner) sliceAdded(elems []any, h uint64, canon bool) (any, bool) {
	if in == nil || !canon {
		return append(make([]any, 0, len(elems)), elems...), false
	}
	s := in.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(c any) bool {
		l, ok := c.([]any)
		if !ok || len(l) != len(elems) {
			return false
		}
		for i := range l {
			if !identical(l[i], elems[i]) {
				return false
			}
		}
		return true
	}
	if c, ok := s.find(h, match); ok {
		return c, false
	}
	var l any = append(make([]any, 0, len(elems)), elems...)
	s.add(h, l)
	return l, true
}

// find looks h up in this round, then in the last (moving a hit to this round).
func (s *internShard) find(h uint64, match func(any) bool) (any, bool) {
	if c, ok := s.cur[h]; ok && match(c) {
		return c, true
	}
	for _, c := range s.more[h] {
		if match(c) {
			return c, true
		}
	}
	if c, ok := s.prev[h]; ok && match(c) {
		s.add(h, c)
		return c, true
	}
	return nil, false
}

func (s *internShard) add(h uint64, node any) {
	if s.cur == nil {
		s.cur = map[uint64]any{}
	}
	if len(s.cur) >= shardRound {
		s.prev, s.cur, s.more = s.cur, map[uint64]any{}, nil
	}
	if _, taken := s.cur[h]; !taken {
		s.cur[h] = node
		return
	}
	if s.more == nil {
		s.more = map[uint64][]any{}
	}
	s.more[h] = append(s.more[h], node)
}

// identical: the same scalar, or the very same map or slice (children of shared nodes are
// shared nodes, so identity is equality).
func identical(a, b any) bool {
	switch x := a.(type) {
	case *record.Record:
		y, ok := b.(*record.Record)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		return len(x) == 0 || &x[0] == &y[0]
	}
	switch b.(type) {
	case *record.Record, []any:
		return false
	}
	return a == b
}
