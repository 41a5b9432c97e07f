package watcher

import (
	"fmt"
	"hash/maphash"
	"math"
)

// An object defined in two places (a manifest copied beside the original, `cp services.yaml
// a-copy.yaml`) is one object too many: one definition is kept, the others are errors where
// they are. Which one is kept must not depend on the files' names: the definition already in
// use stays in use and the newcomer is held, whatever the names (see preferKept), across
// restarts too (Choices).

// duplicates finds the objects of d.jobs defined more than once and picks the definition kept
// of each (d.prefer; the first without it). It returns the others: job index -> where the
// kept definition is.
func (d *manifestDecoder) duplicates() map[int]*origin {
	d.seen.init(len(d.jobs))
	var groups map[objectKey][]int
	for i := range d.jobs {
		j := &d.jobs[i]
		if !j.defines() {
			continue
		}
		k := j.res.key()
		first, dup := d.seen.add(k, i, func(i int) objectKey { return d.jobs[i].res.key() })
		if !dup {
			continue
		}
		if groups == nil {
			groups = map[objectKey][]int{}
		}
		if groups[k] == nil {
			groups[k] = []int{first}
		}
		groups[k] = append(groups[k], i)
	}
	if groups == nil {
		return nil
	}
	out := map[int]*origin{}
	for k, idx := range groups {
		defs := make([]*origin, len(idx))
		for n, i := range idx {
			defs[n] = d.jobs[i].at
		}
		keep := 0
		if d.prefer != nil {
			keep = d.prefer(k, defs)
		}
		for n, i := range idx {
			if n != keep {
				out[i] = defs[keep]
			}
		}
	}
	return out
}

// defines says whether the job is an object add keeps under its name (not an error, not an
// ignored kind, not a dropped Secret, not nameless).
func (j *job) defines() bool {
	if (j.p != nil && j.p.err != nil) || j.skipped() || j.res == nil {
		return false
	}
	k := j.res.key()
	return k.kind != "" && k.name != ""
}

// duplicateError is the error of a definition of k at at that is not kept: kept says where the
// one in use is.
func duplicateError(at *origin, k objectKey, kept *origin) error {
	return inputError(at.rel, at.line, 0, fmt.Errorf("%s %s/%s is defined twice: first in %s line %d, whose definition stays in use (remove one of them)",
		k.kind, k.namespace, k.name, kept.rel, kept.line))
}

// seenSet remembers the first job that defined each object, by a 32-bit hash of its kind,
// namespace and name (8 bytes an object: 1 MB for a hundred thousand, kept between reads);
// equal hashes are compared exactly, and the few objects whose hash an earlier one has (one
// or two among a hundred thousand) are kept by their key.
type seenSet struct {
	first map[uint32]uint32
	more  map[objectKey]int // objects whose hash an earlier one has
	size  int               // the objects first was made for
}

// init readies the set for n jobs: the set of the last read, cleared (a File keeps it between
// reads: readScratch), unless made for fewer jobs (it would grow through doubling sizes) or
// for far more (it would hold their room).
func (s *seenSet) init(n int) {
	if s.first == nil || s.size < n || s.size > 2*n+1024 {
		s.first, s.size = make(map[uint32]uint32, n), n
	} else {
		clear(s.first)
	}
	s.more = nil
}

var seenSeed = maphash.MakeSeed()

func seenHash(k objectKey) uint32 {
	var h maphash.Hash
	h.SetSeed(seenSeed)
	h.WriteString(k.kind)
	h.WriteByte(0)
	h.WriteString(k.namespace)
	h.WriteByte(0)
	h.WriteString(k.name)
	return uint32(h.Sum64())
}

// add records that job i defines k, or returns the first job that defined k (dup true); keyOf
// gives the key of an earlier job.
func (s *seenSet) add(k objectKey, i int, keyOf func(int) objectKey) (first int, dup bool) {
	sum := seenHash(k)
	prev, ok := s.first[sum]
	switch {
	case !ok && uint64(i) <= math.MaxUint32:
		s.first[sum] = uint32(i)
		return 0, false
	case ok && keyOf(int(prev)) == k:
		return int(prev), true
	}
	if prev, ok := s.more[k]; ok {
		return prev, true
	}
	if s.more == nil {
		s.more = map[objectKey]int{}
	}
	s.more[k] = i
	return 0, false
}

// preferKept is File's choice among the definitions of an object defined more than once:
// the one kept last, if its file still defines the object; else the first from a file that
// defined it before (the object in use is not taken over by a newcomer); else the first in
// the order of the files. kept are the definitions kept of the objects found defined twice
// before, defined says whether a file defined an object before; this read's choices are
// recorded in chosen.
func preferKept(defined func(rel string, k objectKey) bool, kept, chosen map[objectKey]string) func(objectKey, []*origin) int {
	return func(k objectKey, defs []*origin) int {
		pick := func() int {
			if rel, ok := kept[k]; ok {
				for n, d := range defs {
					if d.rel == rel {
						return n
					}
				}
			}
			for n, d := range defs {
				if defined(d.rel, k) {
					return n
				}
			}
			return 0
		}
		n := pick()
		chosen[k] = defs[n].rel
		return n
	}
}

// definedIn says whether a file defined an object in the read that found files (asked
// lazily: only for objects defined twice).
func definedIn(files map[string]*fileEntry) func(rel string, k objectKey) bool {
	before := map[string]map[objectKey]bool{}
	return func(rel string, k objectKey) bool {
		keys, ok := before[rel]
		if !ok {
			keys = files[rel].keys()
			before[rel] = keys
		}
		return keys[k]
	}
}

// definedInFiles says, knowing only the names of the files read before (Choices.Files),
// that any of them defined any object: a definition from a file that was not there is the
// newcomer.
func definedInFiles(files []string) func(rel string, k objectKey) bool {
	known := make(map[string]bool, len(files))
	for _, f := range files {
		known[f] = true
	}
	return func(rel string, _ objectKey) bool { return known[rel] }
}

// keys are the objects e gave the last read (nil e: none).
func (e *fileEntry) keys() map[objectKey]bool {
	if e == nil {
		return nil
	}
	c := e.appendContribution(nil)
	out := make(map[objectKey]bool, len(c))
	for i := range c {
		if c[i].defines() {
			out[c[i].res.key()] = true
		}
	}
	return out
}
