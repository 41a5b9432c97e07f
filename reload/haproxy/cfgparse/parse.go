package cfgparse

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// ParseAfter reads a configuration as Parse does, reusing the sections of prev (a configuration
// this package read before, nil for none) that text repeats: a section whose bytes, from its
// header line to the next one, are those of a section of prev, and which inherits the same
// default-server parameters there, is prev's, wherever it now is (where is the Config's:
// Lines). Its cost then follows what changed, not the size of text.
// The result, and an error's line, are those of Parse(text).
//
// The sections read anew are parsed from a copy of their own bytes, and refer to nothing of
// text: a Config made this way keeps alive the text of the last Parse it descends from and the
// copies of the sections that changed since, never one text per change (a section kept across
// changes would keep each rendering's whole text otherwise). The reused sections refer to the
// texts prev was read from, which must not be changed either.
func ParseAfter(prev *Config, text []byte) (*Config, error) {
	c := &Config{}
	if prev != nil {
		// About as many sections as prev: no growing of the lists.
		c.Sections = make([]*Section, 0, len(prev.Sections)+8)
		c.Lines = make([]SectionLines, 0, len(prev.Sections)+8)
	}
	p := &parser{named: map[string]*Section{}, bases: map[*Section][]string{}, params: map[string][]string{}}
	var m *matcher
	if prev != nil && len(prev.Sections) > 0 {
		m = &matcher{prev: prev.Sections, next: 1, uniquePrev: prev.uniqueProxies}
		p.own = true
	}
	// The words are substrings of text (or of a section's copy), not of a copy of all of it:
	// a rendered configuration is never changed once made, and the runtime API keeps the
	// parsed one as long as HAProxy runs it.
	rest := unsafe.String(unsafe.SliceData(text), len(text))
	var inserted []*Section // sections with servers found nowhere in prev
	for n, implicit := 1, true; implicit || rest != ""; implicit = false {
		if m != nil && !implicit {
			// The sections rest repeats in prev's order, each for a comparison of its bytes.
			for known := false; ; {
				var sec *Section
				if sec, known = m.repeated(p, rest, known); sec == nil {
					break
				}
				c.add(p, sec, n, false)
				rest = rest[len(sec.src):]
				n += sec.nl
			}
		}
		var sec, found *Section
		end := 0 // the length of the section, when known
		if m != nil {
			found = m.find(rest, implicit)
			sec, end = p.reuse(found, rest, implicit, m.nextHead())
		}
		if sec == nil {
			src := rest
			if p.own {
				if end == 0 {
					end = p.sectionEnd(rest, implicit)
				}
				src = strings.Clone(rest[:end])
			}
			var err error
			if sec, err = p.section(src, n, implicit); err != nil {
				return nil, err
			}
		}
		if found == nil && sec.HasServers() {
			inserted = append(inserted, sec)
		}
		c.add(p, sec, n, implicit)
		rest = rest[len(sec.src):]
		n += sec.nl
	}
	c.uniqueProxies = m != nil && m.unique(inserted, c.Sections) || uniqueProxies(c.Sections)
	return c, nil
}

// add appends a section read or reused, its header at line n.
func (c *Config) add(p *parser, sec *Section, n int, implicit bool) {
	p.enter(sec)
	c.Sections = append(c.Sections, sec)
	if implicit {
		n = 0
	}
	c.Lines = append(c.Lines, SectionLines{Header: int32(n), Servers: int32(n)})
	c.Conditional = c.Conditional || sec.cond
}

// unique reports that the sections of a configuration read after prev have unique proxy keys
// when it can tell cheaply: prev's are, every section found in prev was found in order (each
// once, by its header line: the same key) and the few found nowhere have keys of their own.
func (m *matcher) unique(inserted, sections []*Section) bool {
	if !m.uniquePrev || m.byHead != nil || len(inserted) > maxMisses {
		return false
	}
	for _, s := range inserted {
		for _, o := range sections {
			if o != s && o.HasServers() && o.Kind == s.Kind && o.Name == s.Name {
				return false
			}
		}
	}
	return true
}

// uniqueProxies reports whether no two sections with servers have the same key.
func uniqueProxies(sections []*Section) bool {
	seen := make(map[[2]string]bool, len(sections))
	for _, s := range sections {
		if !s.HasServers() {
			continue
		}
		k := [2]string{s.Kind, s.Name}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// parser is the state of one read: what a section inherits depends on the defaults sections
// above it.
type parser struct {
	named map[string]*Section // named defaults sections seen so far
	last  *Section            // the last defaults section seen
	// bases are the default-server words inherited from each defaults section (by the one a
	// section names or follows), for the defaults sections seen so far.
	bases   map[*Section][]string
	scratch []string // the words of the line being read
	pool    []Server // servers are allocated by the chunk
	// params shares the parameter lists servers repeat ("check", "check weight 10", ...).
	params map[string][]string
	// own: each section is read from its own copy, and its servers are allocated apart, so
	// that nothing of a section refers to another one's memory (ParseAfter).
	own bool
}

// section reads one section from the start of text: its header line (unless implicit: the
// lines before the first header), up to the next header line.
func (p *parser) section(text string, n int, implicit bool) (*Section, error) {
	sec := &Section{}
	if p.own {
		p.pool = nil // made for the section's servers, if it has any (header)
	}
	rest, head := text, n
	for ; rest != ""; n++ {
		raw, after := rest, ""
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			raw, after = rest[:i], rest[i+1:]
		}
		words, err := p.words(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(words) > 0 {
			kw := Unquote(words[0])
			switch kw {
			case ".if", ".elif", ".else", ".endif":
				sec.cond = true
			}
			if SectionKeywords[kw] {
				if implicit || len(rest) != len(text) {
					break // the next section's header
				}
				p.header(sec, kw, words)
				if p.own && sec.HasServers() {
					// One chunk: nothing of the section refers to another one's memory.
					p.pool = make([]Server, 0, max(1, strings.Count(text, "server")))
				}
			} else if err := p.line(sec, kw, raw, words, n, n-head); err != nil {
				return nil, err
			}
		}
		rest = after
	}
	sec.src = text[:len(text)-len(rest)]
	sec.nl = strings.Count(sec.src, "\n")
	return sec, nil
}

// words are a line's words up to a comment, in p.scratch: keep copies only.
func (p *parser) words(raw string) ([]string, error) {
	if commentLine(raw) {
		return p.scratch[:0], nil // what appendWords reads, without reading the comment
	}
	words, err := appendWords(p.scratch[:0], raw)
	if err != nil {
		return nil, err
	}
	p.scratch = words
	// A comment at the end of a line is no part of the configuration.
	for i, w := range words {
		if strings.HasPrefix(w, "#") {
			return words[:i], nil
		}
	}
	return words, nil
}

// commentLine reports whether a line is a comment only: white space, then #. Its words up to
// the comment are none (a rendering may have thousands: one per Ingress it serves).
func commentLine(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if !isSpace(raw[i]) {
			return raw[i] == '#'
		}
	}
	return false
}

// header reads a section's header line.
func (p *parser) header(sec *Section, kw string, words []string) {
	sec.Kind, sec.Header = kw, slices.Clone(words)
	args := unquoteAll(words[1:])
	if len(args) > 0 && args[0] != "from" {
		sec.Name = args[0]
		args = args[1:]
	}
	if len(args) >= 2 && args[0] == "from" {
		sec.From = args[1]
	}
	if sec.HasServers() {
		sec.base = p.base(sec)
	}
}

// line reads a line of a section but its header: line n of the text, off lines below the
// header.
func (p *parser) line(sec *Section, kw, raw string, words []string, n, off int) error {
	if kw == "default-server" {
		sec.defaultServer = append(sec.defaultServer, words[1:]...)
	}
	if kw == "server" && sec.HasServers() {
		if len(p.pool) == cap(p.pool) {
			p.pool = make([]Server, 0, 256)
		}
		p.pool = p.pool[:len(p.pool)+1]
		s := &p.pool[len(p.pool)-1]
		if err := parseServer(s, words, n, off, p.params); err != nil {
			return err
		}
		s.Inherited = append(sec.base[:len(sec.base):len(sec.base)], sec.defaultServer...)
		sec.Servers = append(sec.Servers, s)
		return nil
	}
	sec.Lines = append(sec.Lines, joined(raw, words))
	return nil
}

// base is the default-server words a backend or listen section inherits here: the same for
// every section that starts from the same defaults section, until another one is seen.
func (p *parser) base(sec *Section) []string {
	d := p.last
	if sec.From != "" {
		d = p.named[sec.From]
	}
	if b, ok := p.bases[d]; ok {
		return b
	}
	b := inherited(sec, p.named, p.last)
	p.bases[d] = b
	return b
}

// enter records a section read or reused: a defaults section changes what the next ones
// inherit.
func (p *parser) enter(sec *Section) {
	if sec.Kind != "defaults" {
		return
	}
	p.last = sec
	if sec.Name != "" {
		p.named[sec.Name] = sec
	}
	clear(p.bases)
}

// isHeader reports whether a line opens a section, as section reads it (a line that cannot be
// read does not: reading its section fails there).
func (p *parser) isHeader(raw string) bool {
	words, err := p.words(raw)
	return err == nil && len(words) > 0 && SectionKeywords[Unquote(words[0])]
}

// sectionEnd is the length of the section at the start of text, as section reads it.
func (p *parser) sectionEnd(text string, implicit bool) int {
	for at := 0; at < len(text); {
		raw, next := text[at:], len(text)
		if i := strings.IndexByte(raw, '\n'); i >= 0 {
			raw, next = raw[:i], at+i+1
		}
		if (implicit || at > 0) && p.isHeader(raw) {
			return at
		}
		at = next
	}
	return len(text)
}

// reuse returns prev (nil: none) for the section at the start of rest when it is the same
// bytes up to the next header line and inherits the same there, wherever it was; nil when it
// must be read, with the section's length when it is prev's text all the same (what it
// inherits changed). head is a header line known (the next section's of prev, "" for none):
// the line after the section is one when it is that line, without reading its words.
func (p *parser) reuse(prev *Section, rest string, implicit bool, head string) (*Section, int) {
	if prev == nil || prev.src == "" || !strings.HasPrefix(rest, prev.src) || (prev.Kind == "") != implicit {
		return nil, 0
	}
	if after := rest[len(prev.src):]; after != "" {
		// The section ends where prev ended only if a header line follows (prev's text ends
		// with a line end then: a header line was next in its own text).
		if !strings.HasSuffix(prev.src, "\n") {
			return nil, 0
		}
		line, _, _ := strings.Cut(after, "\n")
		if (head == "" || line != head) && !p.isHeader(line) {
			return nil, 0
		}
	}
	if prev.HasServers() && !slices.Equal(p.base(prev), prev.base) {
		return nil, len(prev.src)
	}
	// Moved or not: its lines are the Config's (Config.Lines).
	return prev, 0
}

// matcher finds the section of a previous configuration a section may be: in file order (the
// next one, or the one after when one was removed), else by its header line.
type matcher struct {
	prev   []*Section
	next   int            // index in prev of the section expected next
	byHead map[string]int // header line -> index of its first section in prev; made when needed
	misses int            // sections not found in order
	// uniquePrev: prev's sections with servers have keys of their own.
	uniquePrev bool
}

// maxMisses is how many sections may be not found in order before the previous sections are
// indexed: so many may be read again for nothing.
const maxMisses = 8

func (m *matcher) find(rest string, implicit bool) *Section {
	if implicit {
		return m.prev[0]
	}
	head, _, _ := strings.Cut(rest, "\n")
	for i := m.next; i < len(m.prev) && i <= m.next+1; i++ {
		if headLine(m.prev[i]) == head {
			m.next = i + 1
			return m.prev[i]
		}
	}
	if m.byHead == nil {
		// A section not found in order is new, most often (a backend added): the sections of
		// prev are indexed only when several are not found so, as when sections were moved
		// or several removed together.
		if m.misses++; m.misses <= maxMisses {
			return nil
		}
		m.byHead = make(map[string]int, len(m.prev))
		for i, s := range m.prev {
			if h := headLine(s); h != "" {
				if _, dup := m.byHead[h]; !dup {
					m.byHead[h] = i
				}
			}
		}
	}
	i, ok := m.byHead[head]
	if !ok {
		return nil
	}
	m.next = i + 1
	return m.prev[i]
}

// repeated is the section of prev expected next when rest repeats it and then the one after it
// in prev (so that the header line that ended it in prev's text follows it), and it inherits
// the same there: the section find and reuse would find, for a comparison of its bytes (at
// 10,000 sections, finding each by its header line and reading the line after it took more
// than the change). known says rest is known to repeat it (the call before compared it);
// known of the result says so of the one after. nil: find and reuse are asked.
func (m *matcher) repeated(p *parser, rest string, known bool) (sec *Section, nextKnown bool) {
	if m.next+1 >= len(m.prev) {
		return nil, false
	}
	s, t := m.prev[m.next], m.prev[m.next+1]
	if s.src == "" || s.Kind == "" || t.src == "" || t.Kind == "" || !strings.HasSuffix(s.src, "\n") {
		return nil, false
	}
	if s.HasServers() && !slices.Equal(p.base(s), s.base) {
		return nil, false // first: when defaults changed, no byte of the backends is compared twice
	}
	if !known && !strings.HasPrefix(rest, s.src) || !strings.HasPrefix(rest[len(s.src):], t.src) {
		return nil, false
	}
	m.next++
	return s, true
}

// nextHead is the header line of the section of prev expected next ("" for none): a header
// line, as every section's first line is but the implicit one's.
func (m *matcher) nextHead() string {
	if m.next >= len(m.prev) {
		return ""
	}
	return headLine(m.prev[m.next])
}

// headLine is the header line of a section as written ("" if it has no text).
func headLine(s *Section) string {
	if s.Kind == "" {
		return ""
	}
	h, _, _ := strings.Cut(s.src, "\n")
	return h
}

// Unchanged reports whether b is a (ParseAfter reused it from a, at the same place or moved):
// then the two are equal, and comparing them can be skipped.
func Unchanged(a, b *Section) bool {
	return a.src != "" && len(a.src) == len(b.src) && unsafe.StringData(a.src) == unsafe.StringData(b.src)
}

// WithServers is a copy of s with other servers (what HAProxy runs once servers were changed at
// runtime). Its text is no longer what it holds: it is never reused nor Unchanged.
func (s *Section) WithServers(servers []*Server) *Section {
	cp := *s
	cp.Servers = servers
	cp.src, cp.nl = "", 0
	return &cp
}
