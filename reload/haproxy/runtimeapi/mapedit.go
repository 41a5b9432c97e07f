package runtimeapi

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// A map file whose change is a few entries (a route added, moved or deleted) goes live as
// those entries, a command each, rather than as a swap of every entry (swapMaps: prepare, the
// whole file in payloads, commit: at 10,000 entries, about half a megabyte through the
// runtime API):
//
//	add map <path> <key> <value>    a key the map does not have
//	set map <path> <key> <value>    a key it has once, another value
//	del map <path> <key>            a key it has once, gone
//
// Only when every use of the map looks it up in a tree: the map (exact key) and map_beg
// (longest prefix) converters. The other matches (map_reg, map_sub, map_end, map_dom, ..., and
// ACLs reading the file) run through a list in file order, which add map cannot place an entry
// in: those maps are swapped, as is a change of a key the map has more than once, or of more
// than maxMapEdits entries.
//
// Each command is atomic, and the order they go in (orderEdits) makes every lookup between
// them find what the old map or the new map finds for its key, never a mix: the adds longest
// key first, then the sets, then the deletes shortest key first. For the longest prefix k
// of a request found at any moment: while adding, a new key k has every longer new key that
// could match already added, and an old key k is the longest in the old map (all of it is
// there); while setting, both maps are there whole; while deleting, a remaining old key k has
// no longer old key deleted before it. As with a swap, a request that looks the map up
// twice may look up before and after a change.

// maxMapEdits bounds the commands of one map's change: past it the swap is sent.
const maxMapEdits = 64

// mapEdit is one entry a map file's change adds, sets or deletes.
type mapEdit struct {
	op         string // "add", "set", "del"
	key, value string
}

func (e *mapEdit) line(path string) string {
	if e.op == "del" {
		return "del map " + path + " " + e.key
	}
	return e.op + " map " + path + " " + e.key + " " + e.value
}

// maxLineDiff bounds the lines a map file's change may add and delete for entryEdits to
// find them by a line diff; past it, every entry of the changed lines is compared.
const maxLineDiff = 16

// entryEdits finds the edits that turn the map file old into new, in the order they are to be
// sent (orderEdits), when their entries (as HAProxy reads them: eachMapEntry) differ by at
// most maxMapEdits keys: ok is false otherwise, or when a key or value is not one word on a
// command line (checkToken), or when a key changed is in either file more than once. same is
// true when the entries are the same, in the same order (comments or spacing changed); no
// edits and not same: entries moved, which only a lookup in file order sees.
//
// Only the lines between what both files begin and end with are read, and of those, when
// few lines were added and deleted, only those (a line diff): a route's new path adds its
// prefix entry among the longest and its exact entry among the keys, far apart in the file.
func entryEdits(old, new []byte, limit int) (edits []mapEdit, same, ok bool) {
	return entryEditsWithin(old, new, limit, maxLineDiff)
}

// entryEditsWithin is entryEdits with a line diff of at most maxDiff lines (0: every entry of
// the changed lines compared).
func entryEditsWithin(old, new []byte, limit, maxDiff int) (edits []mapEdit, same, ok bool) {
	edits, same, ok, _ = entryEditsKeyed(old, new, limit, maxDiff, nil)
	return edits, same, ok
}

// entryEditsKeyed is entryEditsWithin with oldKeys giving the index of the keys of old (nil:
// old is read for them), asked for only when the line diff found the change; newKeys is the
// index of new derived from it then (nil otherwise).
func entryEditsKeyed(old, new []byte, limit, maxDiff int, keysOf func() *keyIndex) (edits []mapEdit, same, ok bool, newKeys *keyIndex) {
	oldMid, newMid, head, tail := changedLines(old, new)
	del, ins, found := lineDiff(oldMid, newMid, maxDiff)
	if !found {
		edits, same, ok = wholeEdits(oldMid, newMid, head, tail, limit)
		return edits, same, ok, nil
	}
	var oldKeys *keyIndex
	if keysOf != nil {
		oldKeys = keysOf()
		newKeys = oldKeys.with(texts(del), texts(ins), new)
	}
	edits, same, ok = diffedEdits(old, new, del, ins, limit, oldKeys, newKeys)
	if ok && !same && len(edits) == 0 {
		// Entries moved, or their spacing changed: whether they are in the same order.
		edits, same, ok = wholeEdits(oldMid, newMid, head, tail, limit)
	}
	return edits, same, ok, newKeys
}

// diffedEdits is entryEdits of the lines a line diff found deleted (del, of old) and inserted
// (ins, of new); no edits, not same and ok: entries moved (the caller compares them whole).
func diffedEdits(old, new []byte, del, ins []textLine, limit int, oldKeys, newKeys *keyIndex) (edits []mapEdit, same, ok bool) {
	oe, oldOrder, ok := uniqueEntries(joinLines(del), limit)
	if !ok {
		return nil, false, false
	}
	ne, newOrder, ok := uniqueEntries(joinLines(ins), limit)
	if !ok {
		return nil, false, false
	}
	if len(oldOrder) == 0 && len(newOrder) == 0 {
		return nil, true, true // comments and blank lines
	}
	if edits, ok = diffEntries(oe, ne); !ok {
		return nil, false, false
	}
	for _, e := range append(oldOrder, newOrder...) { // the keys of moved entries too
		if manyOf(oldKeys, old, e[0]) || manyOf(newKeys, new, e[0]) {
			return nil, false, false
		}
	}
	if len(edits) == 0 {
		return nil, false, true
	}
	return sendable(edits)
}

// texts are the bytes of lines.
func texts(lines []textLine) [][]byte {
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// wholeEdits is entryEdits of the changed lines read whole, every entry of both compared.
func wholeEdits(oldMid, newMid, head, tail []byte, limit int) (edits []mapEdit, same, ok bool) {
	oe, oldOrder, ok := uniqueEntries(oldMid, limit)
	if !ok {
		return nil, false, false
	}
	ne, newOrder, ok := uniqueEntries(newMid, limit)
	if !ok {
		return nil, false, false
	}
	if slices.Equal(oldOrder, newOrder) {
		return nil, true, true
	}
	if edits, ok = diffEntries(oe, ne); !ok {
		return nil, false, false
	}
	for _, e := range edits {
		if hasKey(head, e.key) || hasKey(tail, e.key) {
			return nil, false, false
		}
	}
	return sendable(edits)
}

// diffEntries are the edits that make the entries old the entries new (by key), in the order
// to send them; ok is false when they are more than maxMapEdits.
func diffEntries(old, new map[string]string) (edits []mapEdit, ok bool) {
	for k, v := range new {
		if ov, had := old[k]; !had {
			edits = append(edits, mapEdit{op: "add", key: k, value: v})
		} else if ov != v {
			edits = append(edits, mapEdit{op: "set", key: k, value: v})
		}
		if len(edits) > maxMapEdits {
			return nil, false
		}
	}
	for k := range old {
		if _, kept := new[k]; !kept {
			edits = append(edits, mapEdit{op: "del", key: k})
		}
		if len(edits) > maxMapEdits {
			return nil, false
		}
	}
	orderEdits(edits)
	return edits, true
}

// sendable is entryEdits' answer for edits: none when one cannot be sent (checkEdits).
func sendable(edits []mapEdit) ([]mapEdit, bool, bool) {
	if !checkEdits(edits) {
		return nil, false, false
	}
	return edits, false, true
}

// checkEdits says whether every edit can be sent as a command line.
func checkEdits(edits []mapEdit) bool {
	for _, e := range edits {
		if checkToken(e.key) != nil || e.op != "del" && checkToken(e.value) != nil || strings.HasSuffix(e.line("/"), "<<") {
			return false // "<<" ending a line starts a payload
		}
	}
	return true
}

// uniqueEntries are the entries of content by key, and in order; ok is false when it does not
// read or has a key twice.
func uniqueEntries(content []byte, limit int) (byKey map[string]string, inOrder [][2]string, ok bool) {
	byKey = map[string]string{}
	dup := false
	_, err := eachMapEntry(content, limit, func(k, v string, _ int) {
		if _, seen := byKey[k]; seen {
			dup = true
		}
		byKey[k] = v
		inOrder = append(inOrder, [2]string{k, v})
	})
	return byKey, inOrder, err == nil && !dup
}

// orderEdits puts the adds first, longest key first, then the sets, then the deletes,
// shortest key first (why: the comment at the top); by key within a length.
func orderEdits(edits []mapEdit) {
	rank := map[string]int{"add": 0, "set": 1, "del": 2}
	slices.SortFunc(edits, func(a, b mapEdit) int {
		if c := cmp.Compare(rank[a.op], rank[b.op]); c != 0 {
			return c
		}
		la, lb := len(a.key), len(b.key)
		if a.op == "add" {
			la, lb = lb, la
		}
		if c := cmp.Compare(la, lb); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
}

// changedLines cuts the lines old and new begin with (head) and end with (tail) off both:
// what is left of each is whole lines.
func changedLines(old, new []byte) (oldMid, newMid, head, tail []byte) {
	p := commonPrefix(old, new)
	p = bytes.LastIndexByte(old[:p], '\n') + 1 // the start of the line that differs
	s := commonSuffix(old[p:], new[p:])
	// The tail starts at a line's start in both: after a newline, or at p (a line's start).
	lineStart := func(b []byte, i int) bool { return i == p || b[i-1] == '\n' }
	for s > 0 && !(lineStart(old, len(old)-s) && lineStart(new, len(new)-s)) {
		s--
	}
	return old[p : len(old)-s], new[p : len(new)-s], old[:p], old[len(old)-s:]
}

// compareChunk is the block commonPrefix and commonSuffix compare at once (bytes.Equal is
// vectorized: a byte at a time, the two ends of 1.5 MB maps took over a millisecond).
const compareChunk = 256

// commonPrefix is the length of the bytes a and b begin with.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	p := 0
	for p+compareChunk <= n && bytes.Equal(a[p:p+compareChunk], b[p:p+compareChunk]) {
		p += compareChunk
	}
	for p < n && a[p] == b[p] {
		p++
	}
	return p
}

// commonSuffix is the length of the bytes a and b end with.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	s := 0
	for s+compareChunk <= n && bytes.Equal(a[len(a)-s-compareChunk:len(a)-s], b[len(b)-s-compareChunk:len(b)-s]) {
		s += compareChunk
	}
	for s < n && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return s
}

// hasKey says whether content may have an entry of key (countKey).
func hasKey(content []byte, key string) bool { return countKey(content, key) > 0 }

// countKey is how many entries of key content may have, up to 2: lines whose first word
// (after spaces and tabs) is key. It may count a comment line too; never the other way.
func countKey(content []byte, key string) int {
	k := []byte(key)
	n := 0
	for i := 0; n < 2; {
		j := bytes.Index(content[i:], k)
		if j < 0 {
			break
		}
		at, end := i+j, i+j+len(k)
		start := bytes.LastIndexByte(content[:at], '\n') + 1
		if len(bytes.Trim(content[start:at], " \t")) == 0 && (end == len(content) || strings.IndexByte(" \t\r\n", content[end]) >= 0) {
			n++
		}
		i = at + 1
	}
	return n
}

// treeConverters are the converters that look a map file up in a tree.
var treeConverters = []string{"map", "map_str", "map_beg", "map_str_int", "map_str_ip", "map_beg_int", "map_beg_ip", "map_beg_str", "map_str_str"}

// treeOnly says whether every mention of path in cfg is the map file of a converter that
// looks it up in a tree (treeConverters): then entries added, set or deleted change what
// every lookup finds as a reload of the file would.
func treeOnly(cfg *cfgparse.Config, path string) bool {
	found := false
	for _, s := range cfg.Sections {
		for _, l := range s.Lines {
			for i := 0; ; {
				j := strings.Index(l[i:], path)
				if j < 0 {
					break
				}
				at := i + j
				if !afterTreeConverter(l[:at]) {
					return false
				}
				end := at + len(path)
				if end < len(l) && l[end] != ',' && l[end] != ')' {
					return false // another file whose name starts as this one's
				}
				found = true
				i = end
			}
		}
	}
	return found
}

// afterTreeConverter says whether before ends with the opening of a tree converter: "map(".
func afterTreeConverter(before string) bool {
	rest, ok := strings.CutSuffix(before, "(")
	if !ok {
		return false
	}
	for _, c := range treeConverters {
		if name, ok := strings.CutSuffix(rest, c); ok && (name == "" || strings.IndexByte(",( \t", name[len(name)-1]) >= 0) {
			return true
		}
	}
	return false
}

// editsWhat says what the edits of the map name do, for the plan's steps.
func editsWhat(edits []mapEdit, name string) string {
	if len(edits) == 1 {
		return edits[0].op + " an entry of map " + name
	}
	n := map[string]int{}
	for _, e := range edits {
		n[e.op]++
	}
	return fmt.Sprintf("edit %d entries of map %s (%d added, %d set, %d deleted)", len(edits), name, n["add"], n["set"], n["del"])
}

// textLine is a line lineDiff found deleted or inserted: its index among the lines of its
// text, and its bytes (without its newline).
type textLine struct {
	n    int
	text []byte
}

// joinLines joins lines, each ending with a newline.
func joinLines(lines []textLine) []byte {
	var out []byte
	for _, l := range lines {
		out = append(append(out, l.text...), '\n')
	}
	return out
}

// lineCount is the number of lines of whole lines (changedLines): the last may have no newline.
func lineCount(t []byte) int {
	n := bytes.Count(t, []byte{'\n'})
	if len(t) > 0 && t[len(t)-1] != '\n' {
		n++
	}
	return n
}

// lineLen is the length of the line at byte o of t, its newline included (0 at the end).
func lineLen(t []byte, o int) int {
	if i := bytes.IndexByte(t[o:], '\n'); i >= 0 {
		return i + 1
	}
	return len(t) - o
}

// lineAt is the line at byte o of t, without its newline.
func lineAt(t []byte, o int) []byte {
	return bytes.TrimSuffix(t[o:o+lineLen(t, o)], []byte{'\n'})
}

// cursor is where lineDiff is on a diagonal: line x of a, at byte ox, and the line of b on the
// diagonal, at byte oy.
type cursor struct{ x, ox, oy int }

// snake follows from c the lines a and b have alike, one after the other: compared as bytes
// at once, not split into lines (at 10,000 map entries, splitting both files' changed lines
// cost more than the diff), up to the first line that differs or the end of either.
func snake(a, b []byte, c cursor) cursor {
	p := commonPrefix(a[c.ox:], b[c.oy:])
	run := bytes.LastIndexByte(a[c.ox:c.ox+p], '\n') + 1 // whole lines alike
	lines := bytes.Count(a[c.ox:c.ox+run], []byte{'\n'})
	next := cursor{x: c.x + lines, ox: c.ox + run, oy: c.oy + run}
	// A last line without a newline is the same as a line of the other text of its bytes,
	// with a newline or without: the end of one text, then the line after is the other's.
	ea, eb := c.ox+p, c.oy+p
	if p > run && (ea == len(a) || a[ea] == '\n') && (eb == len(b) || b[eb] == '\n') {
		next.x, next.ox, next.oy = next.x+1, min(ea+1, len(a)), min(eb+1, len(b))
	}
	return next
}

// lineDiff is a shortest edit script from the lines of a to those of b (whole lines,
// changedLines; Myers' O(ND) algorithm): the lines of a it deletes and those of b it inserts,
// in order; found is false when it needs more than max.
func lineDiff(a, b []byte, max int) (del, ins []textLine, found bool) {
	n, m := lineCount(a), lineCount(b)
	if n-m > max || m-n > max {
		return nil, nil, false
	}
	off := max + 1
	v := make([]cursor, 2*max+3)
	var trace [][]cursor // v before each round
	for d := 0; d <= max; d++ {
		trace = append(trace, slices.Clone(v))
		for k := -d; k <= d; k += 2 {
			var c cursor // the start, at d == 0
			switch {
			case d == 0:
			case k == -d || k != d && v[off+k-1].x < v[off+k+1].x:
				c = v[off+k+1] // a line of b inserted
				c.oy += lineLen(b, c.oy)
			default:
				c = v[off+k-1] // a line of a deleted
				c.x, c.ox = c.x+1, c.ox+lineLen(a, c.ox)
			}
			if c.x < n && c.x-k < m {
				c = snake(a, b, c)
			}
			v[off+k] = c
			if c.x >= n && c.x-k >= m {
				del, ins = backtrack(trace, off, a, b, c.x, c.x-k)
				return del, ins, true
			}
		}
	}
	return nil, nil, false
}

// backtrack walks lineDiff's rounds back from (n, m): the deletions and insertions, in order.
func backtrack(trace [][]cursor, off int, a, b []byte, n, m int) (del, ins []textLine) {
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		v, k := trace[d], x-y
		prev := k - 1
		if k == -d || k != d && v[off+k-1].x < v[off+k+1].x {
			prev = k + 1
		}
		p := v[off+prev]
		px, py := p.x, p.x-prev
		for x > px && y > py {
			x, y = x-1, y-1 // lines both have
		}
		if x == px {
			ins = append(ins, textLine{n: py, text: lineAt(b, p.oy)})
		} else {
			del = append(del, textLine{n: px, text: lineAt(a, p.ox)})
		}
		x, y = px, py
	}
	slices.Reverse(del)
	slices.Reverse(ins)
	return del, ins
}
