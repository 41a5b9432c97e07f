package runtimeapi

import (
	"bytes"
	"hash/maphash"
	"maps"
	"slices"
)

// A map file's change is sent as entry edits only when no key it changes is in either file
// more than once (entryEdits): at 10,000 Ingresses, counting each changed key's lines in both
// whole files took 1.7 ms of a change's plan. A keyIndex counts them once per file instead,
// kept with the Model for the next change, which derives its own from the lines the change
// deleted and inserted: a change costs its lines, not the file's.

// maxKeyDelta bounds the keys a keyIndex counts apart from its base before a new base is made
// from the whole file (once in so many changes).
const maxKeyDelta = 256

// keyIndex counts the lines of one map file by their first word, as countKey does, under a
// 64-bit hash of the word: a count is never below countKey's, and above it only when two
// words share a hash (a count above 1 is checked with countKey: manyOf). Never changed once
// made: versions share their base.
type keyIndex struct {
	seed maphash.Seed
	// base are the hashes of the first words of the lines of the file it was made from,
	// sorted (8 bytes a line: a map of them took three times as much).
	base  []uint64
	delta map[uint64]int32 // the lines changed since then: inserted +1, deleted -1
}

// newKeyIndex counts the lines of content.
func newKeyIndex(content []byte) *keyIndex {
	x := &keyIndex{seed: maphash.MakeSeed(), base: make([]uint64, 0, bytes.Count(content, []byte{'\n'})+1)}
	for rest := content; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if w := firstWord(line); len(w) > 0 {
			x.base = append(x.base, maphash.Bytes(x.seed, w))
		}
	}
	slices.Sort(x.base)
	x.base = slices.Clip(x.base)
	return x
}

// indexKeys are the indexes of every map file of maps.
func indexKeys(maps map[string][]byte) map[string]*keyIndex {
	out := make(map[string]*keyIndex, len(maps))
	for name, content := range maps {
		out[name] = newKeyIndex(content)
	}
	return out
}

// firstWord is the word of a line (without its newline) countKey would take for a key: after
// spaces and tabs, up to a space, tab or CR.
func firstWord(line []byte) []byte {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	j := i
	for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\r' {
		j++
	}
	return line[i:j]
}

// count is how many lines may have key for a first word (never fewer than have it).
func (x *keyIndex) count(key string) int {
	h := maphash.String(x.seed, key)
	i, found := slices.BinarySearch(x.base, h)
	n := int(x.delta[h])
	for ; found && i < len(x.base) && x.base[i] == h; i++ {
		n++
	}
	return n
}

// with is the index of the file x counts with the lines del deleted and the lines ins
// inserted (whole lines, without newlines); content is that file, of which a new base is made
// once the changes since the base are many.
func (x *keyIndex) with(del, ins [][]byte, content []byte) *keyIndex {
	if len(x.delta)+len(del)+len(ins) > maxKeyDelta {
		return newKeyIndex(content)
	}
	next := &keyIndex{seed: x.seed, base: x.base, delta: maps.Clone(x.delta)}
	if next.delta == nil {
		next.delta = map[uint64]int32{}
	}
	add := func(lines [][]byte, by int32) {
		for _, l := range lines {
			if w := firstWord(l); len(w) > 0 {
				h := maphash.Bytes(x.seed, w)
				if next.delta[h] += by; next.delta[h] == 0 {
					delete(next.delta, h)
				}
			}
		}
	}
	add(del, -1)
	add(ins, +1)
	return next
}

// manyOf says whether content has more than one line of key for a first word (countKey), x
// counting its lines (nil: none, content is read).
func manyOf(x *keyIndex, content []byte, key string) bool {
	if x != nil && x.count(key) <= 1 {
		return false
	}
	return countKey(content, key) > 1
}
