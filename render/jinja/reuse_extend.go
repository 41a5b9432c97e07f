package jinja

// extend grows a list by doubling (appendDoubling); the first large list it grows at a call
// site in a render is made, at once, as long as the first one it grew there in the last
// render was at its end. The Ingress example merges its 160 blocks' parts into lists of 10,000 items and
// more at each change of an Ingress: doubling copied each about twice over and allocated
// twice its size. The room is a guess (the output is the same whatever it is): a list that
// ends shorter than the last holds the difference until it is dropped.

// minExtendRoom is how long a list must grow to for extend to make it as long as the last.
const minExtendRoom = 1024

// extendRoom is the room for a list l, to be grown to n items by the extend being called:
// how long the last list grown at its site was (0: doubling's).
func (e *evaluator) extendRoom(l *List, n int) int {
	at := e.callAt
	if n <= cap(l.items) || n < minExtendRoom || at == nil || e.shared == nil || e.shared.Across == nil ||
		e.shared.Apart {
		return 0
	}
	c := &e.shared.Across.bodies
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.site(e.prog, at)
	if _, seen := e.grown[s]; seen {
		return 0 // one list per site and render: a loop making many, one takes the room
	}
	if e.grown == nil {
		e.grown = map[*seqSite]*List{}
	}
	e.grown[s] = l
	return min(s.extended, e.maxItems)
}

// noteGrown notes, at the end of a render, how long the first lists its extends grew are, by
// site.
func (c *ModuleCache) noteGrown(grown map[*seqSite]*List) {
	c.bodies.mu.Lock()
	defer c.bodies.mu.Unlock()
	for s, l := range grown {
		s.extended = len(l.items)
	}
}
