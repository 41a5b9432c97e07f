package jinja

import "testing"

// An item found a few places from where it looked (one added or deleted before it) moves
// where the next look without indexing the hints; one found far from there, through them.
func TestPlacedRealignNear(t *testing.T) {
	ents := make([]*bodyEntry, 100)
	for i := range ents {
		ents[i] = &bodyEntry{}
	}
	p := placed[*bodyEntry]{hints: ents}
	// One item added at 10: item 11 is the last render's 10.
	p.realign(ents[10], 11)
	if p.offset != -1 || p.pos != nil {
		t.Fatalf("added: offset %d, indexed %v; want -1, not indexed", p.offset, p.pos != nil)
	}
	if e, ok := p.at(12); !ok || e != ents[11] {
		t.Fatalf("after the one added, item 12 looks at %v; want the last render's 11", e)
	}
	// Two deleted at 20: item 20 is the last render's 22.
	p.realign(ents[22], 20)
	if p.offset != 2 || p.pos != nil {
		t.Fatalf("deleted: offset %d, indexed %v; want 2, not indexed", p.offset, p.pos != nil)
	}
	// Far: through the index.
	p.realign(ents[90], 30)
	if p.offset != 60 || p.pos == nil {
		t.Fatalf("far: offset %d, indexed %v; want 60, indexed", p.offset, p.pos != nil)
	}
	// Not in the hints: where it was.
	p.realign(&bodyEntry{}, 31)
	if p.offset != 60 {
		t.Fatalf("not a hint: offset %d; want 60", p.offset)
	}
	// Near the start and end: within the hints only.
	q := placed[*bodyEntry]{hints: ents[:5]}
	q.realign(ents[0], 3)
	q.realign(ents[4], 0)
	if q.offset != 4 || q.pos != nil {
		t.Fatalf("ends: offset %d, indexed %v; want 4, not indexed", q.offset, q.pos != nil)
	}
}
