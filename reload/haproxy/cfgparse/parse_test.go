package cfgparse

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// parseBoth reads text after prev both ways and fails unless the results (or errors) are the
// same; it returns ParseAfter's, and how many of its sections are prev's (Unchanged).
func parseBoth(t *testing.T, prev *Config, text string) (*Config, int, error) {
	t.Helper()
	want, werr := Parse([]byte(text))
	got, gerr := ParseAfter(prev, []byte(text))
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("ParseAfter error %v, Parse error %v\n%s", gerr, werr, text)
	}
	if werr != nil {
		return nil, 0, werr
	}
	if !reflect.DeepEqual(got, want) {
		for i := range max(len(got.Sections), len(want.Sections)) {
			if i >= len(got.Sections) || i >= len(want.Sections) || !reflect.DeepEqual(got.Sections[i], want.Sections[i]) {
				t.Fatalf("section %d differs from Parse's (Conditional %v/%v):\n got %s\nwant %s\ntext:\n%s", i,
					got.Conditional, want.Conditional, dump(got, i), dump(want, i), text)
			}
		}
		t.Fatalf("Conditional %v, Parse's %v", got.Conditional, want.Conditional)
	}
	checkLines(t, want, text)
	return got, reusedFrom(prev, got), nil
}

// checkLines checks what Parse says against the text itself, as both share their code: the
// line of each header and server, and whether it has conditional blocks.
func checkLines(t *testing.T, c *Config, text string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	cond := slices.ContainsFunc(lines, func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 0 && slices.Contains([]string{".if", ".elif", ".else", ".endif"}, f[0])
	})
	if c.Conditional != cond {
		t.Fatalf("Conditional %v for\n%s", c.Conditional, text)
	}
	keys := map[string]int{}
	for _, s := range c.Sections {
		if s.HasServers() {
			keys[s.Key()]++
		}
	}
	if unique := !slices.ContainsFunc(slices.Collect(maps.Values(keys)), func(n int) bool { return n > 1 }); c.UniqueProxies() != unique {
		t.Fatalf("UniqueProxies %v for\n%s", c.UniqueProxies(), text)
	}
	if len(c.Lines) != len(c.Sections) {
		t.Fatalf("%d sections, lines of %d", len(c.Sections), len(c.Lines))
	}
	for i, s := range c.Sections {
		if n := c.Line(i); (n > 0) != (s.Kind != "") || n > 0 && !strings.HasPrefix(strings.Trim(strings.TrimSpace(lines[n-1]), `"`), s.Kind) {
			t.Fatalf("%s at line %d", s.Key(), n)
		}
		for _, sv := range s.Servers {
			n := c.ServerLine(i, sv)
			if f := strings.Fields(lines[n-1]); len(f) < 2 || f[0] != "server" || f[1] != sv.Name {
				t.Fatalf("server %s at line %d: %q", sv.Name, n, lines[n-1])
			}
		}
	}
}

func dump(c *Config, i int) string {
	if i >= len(c.Sections) {
		return "(none)"
	}
	s := c.Sections[i]
	out := fmt.Sprintf("%+v", *s)
	for _, sv := range s.Servers {
		out += fmt.Sprintf("\n    %+v", *sv)
	}
	return out
}

// reusedFrom counts the sections of c that are sections of prev, kept or moved.
func reusedFrom(prev, c *Config) int {
	if prev == nil {
		return 0
	}
	n := 0
	for _, s := range c.Sections {
		if slices.ContainsFunc(prev.Sections, func(p *Section) bool { return Unchanged(p, s) }) {
			n++
		}
	}
	return n
}

const tricky = `# lines before the first section
global
    maxconn 100
defaults base
    mode http
    default-server inter 2s
defaults web from base
    default-server rise 3
frontend fe
    bind :80
    use_backend b2 if { path_beg /b2 }
backend b1
    server s1 10.0.0.1:80 check
    server s2 10.0.0.2:80 check
backend b2 from base
    default-server fall 2
    server s1 10.0.1.1:80
listen li
    bind :81
    server s1 10.0.2.1:80 weight 2
backend b3
    server s1 10.0.3.1:80
`

func TestParseAfterEdits(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(string) string
		reused int // sections of the edited text that are the previous ones
	}{
		{"nothing changed", func(s string) string { return s }, 9},
		{"a server's port", func(s string) string { return strings.Replace(s, "10.0.0.2:80", "10.0.0.2:81", 1) }, 8},
		{"a server added", func(s string) string {
			return strings.Replace(s, "    server s2 10.0.0.2:80 check\n", "    server s2 10.0.0.2:80 check\n    server s3 10.0.0.3:80\n", 1)
		}, 8},
		{"a server removed, the sections below move", func(s string) string {
			return strings.Replace(s, "    server s2 10.0.0.2:80 check\n", "", 1)
		}, 8},
		{"a backend inserted: all below move", func(s string) string {
			return strings.Replace(s, "backend b1\n", "backend b0\n    server s1 10.9.0.1:80\n\nbackend b1\n", 1)
		}, 9},
		{"a backend removed", func(s string) string {
			return strings.Replace(s, "backend b1\n    server s1 10.0.0.1:80 check\n    server s2 10.0.0.2:80 check\n", "", 1)
		}, 8},
		{"two sections swapped", func(s string) string {
			b3 := "backend b3\n    server s1 10.0.3.1:80\n"
			return strings.Replace(strings.Replace(s, b3, "", 1), "backend b1\n", b3+"backend b1\n", 1)
		}, 8}, // b3, out of order, is read again: prev is indexed only after several such
		{"a defaults' default-server: its backends read again", func(s string) string {
			return strings.Replace(s, "default-server inter 2s", "default-server inter 3s", 1)
		}, 4}, // the implicit section, global, web (a defaults section's words are its own), fe
		{"a defaults changed but not its default-server", func(s string) string {
			return strings.Replace(s, "    mode http\n", "    mode tcp\n", 1)
		}, 8},
		{"a backend's from changed", func(s string) string { return strings.Replace(s, "backend b2 from base", "backend b2 from web", 1) }, 8},
		{"a backend's from names nothing", func(s string) string { return strings.Replace(s, "backend b2 from base", "backend b2 from none", 1) }, 8},
		{"a defaults section added above the backends", func(s string) string {
			return strings.Replace(s, "frontend fe\n", "defaults\n    default-server check\nfrontend fe\n", 1)
		}, 6},
		{"a named defaults renamed", func(s string) string {
			return strings.Replace(s, "defaults web from base", "defaults web2 from base", 1)
		}, 8},
		{"a conditional block", func(s string) string {
			return strings.Replace(s, "    server s1 10.0.3.1:80\n", ".if defined(X)\n    server s1 10.0.3.1:80\n.endif\n", 1)
		}, 8},
		{"a comment and blank lines", func(s string) string {
			return strings.Replace(s, "listen li\n", "\n# li\n\nlisten li\n", 1)
		}, 8},
		{"the implicit first section", func(s string) string { return "foo bar\n" + s }, 8},
		{"no implicit first section", func(s string) string { return strings.TrimPrefix(s, "# lines before the first section\n") }, 8},
		{"a header written otherwise", func(s string) string { return strings.Replace(s, "backend b3\n", "  backend b3 # the last\n", 1) }, 8},
		{"a quoted header", func(s string) string { return strings.Replace(s, "backend b3\n", "\"backend\" b3\n", 1) }, 8},
		{"no line end at the end", func(s string) string { return strings.TrimSuffix(s, "\n") }, 8},
		{"a section's text continued after the end", func(s string) string { return s + "    server s2 10.0.3.2:80\n" }, 8},
		{"a section duplicated", func(s string) string { return s + "backend b3\n    server s1 10.0.3.1:80\n" }, 9},
		{"a default-server line in a backend", func(s string) string {
			return strings.Replace(s, "backend b3\n", "backend b3\n    default-server weight 5\n", 1)
		}, 8},
		{"a server line in a frontend", func(s string) string {
			return strings.Replace(s, "    bind :80\n", "    bind :80\n    server x 1.2.3.4:80\n", 1)
		}, 8},
		{"an unterminated quote in a changed section", func(s string) string {
			return strings.Replace(s, "    server s1 10.0.3.1:80\n", "    acl x \"y\n", 1)
		}, -1},
		{"a server without address after sections that moved", func(s string) string {
			return "x\n" + strings.Replace(s, "    server s1 10.0.3.1:80\n", "    server s1\n", 1)
		}, -1},
		{"an unterminated quote on a header", func(s string) string { return strings.Replace(s, "listen li\n", "listen \"li\n", 1) }, -1},
	}
	prev, _, err := parseBoth(t, nil, tricky)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, reused, err := parseBoth(t, prev, tc.edit(tricky))
			if tc.reused < 0 {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if reused != tc.reused {
				t.Errorf("%d sections reused, want %d", reused, tc.reused)
			}
		})
	}
}

// genConfig is a configuration as sections of lines, edited at random.
type genConfig struct {
	sections [][]string // the first is the implicit one: no header
	noEOL    bool       // the last line has no line end
	next     int
}

func (g *genConfig) text() string {
	var b strings.Builder
	for _, s := range g.sections {
		for _, l := range s {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	s := b.String()
	if g.noEOL {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

func newGenConfig(r *rand.Rand) *genConfig {
	g := &genConfig{sections: [][]string{
		{"# generated"},
		{"global", "    maxconn 100"},
		{"defaults d1", "    mode http", "    default-server inter 2s"},
		{"defaults d2 from d1", "    default-server rise 3"},
		{"frontend fe", "    bind :80"},
		{"userlist u", "    user a insecure-password b"},
	}}
	for range 12 {
		g.sections = append(g.sections, g.backend(r))
	}
	return g
}

func (g *genConfig) backend(r *rand.Rand) []string {
	g.next++
	kind := []string{"backend", "backend", "backend", "listen"}[r.IntN(4)]
	head := fmt.Sprintf("%s b%d", kind, g.next)
	if r.IntN(3) == 0 {
		head += " from " + []string{"d1", "d2", "d3"}[r.IntN(3)]
	}
	s := []string{head, "    balance roundrobin"}
	if r.IntN(3) == 0 {
		s = append(s, "    default-server check")
	}
	for i := range 1 + r.IntN(4) {
		s = append(s, g.server(r, i))
	}
	return s
}

func (g *genConfig) server(r *rand.Rand, i int) string {
	return fmt.Sprintf("    server s%d 10.0.%d.%d:%d weight %d", i, r.IntN(4), r.IntN(250), 80+r.IntN(3), 1+r.IntN(3))
}

// edit makes one random change; bad ones make the text unreadable.
func (g *genConfig) edit(r *rand.Rand) (bad bool) {
	at := func() int { return 1 + r.IntN(len(g.sections)-1) } // a section but the implicit one
	sec := func() (int, []string) {
		i := at()
		return i, g.sections[i]
	}
	switch r.IntN(17) {
	case 0, 1, 2: // a server changed or added
		i, s := sec()
		j := 1 + r.IntN(len(s))
		line := g.server(r, r.IntN(6))
		if j < len(s) && r.IntN(2) == 0 {
			s[j] = line
		} else {
			g.sections[i] = slices.Insert(s, j, line)
		}
	case 3: // a line removed
		i, s := sec()
		if len(s) > 1 {
			j := 1 + r.IntN(len(s)-1)
			g.sections[i] = slices.Delete(s, j, j+1)
		}
	case 4: // a backend inserted
		g.sections = slices.Insert(g.sections, at(), g.backend(r))
	case 5: // a section removed
		if len(g.sections) > 3 {
			i := at()
			g.sections = slices.Delete(g.sections, i, i+1)
		}
	case 6: // a defaults section's default-server
		if i := g.find(r, "defaults"); i > 0 {
			g.sections[i] = append(g.sections[i][:1], fmt.Sprintf("    default-server inter %ds", 1+r.IntN(3)))
		}
	case 7: // a header's from
		_, s := sec()
		if f := strings.Fields(s[0]); len(f) >= 2 && (f[0] == "backend" || f[0] == "listen") {
			s[0] = f[0] + " " + f[1] + []string{"", " from d1", " from d2", " from d3"}[r.IntN(4)]
		}
	case 8: // comments and blank lines
		i, s := sec()
		g.sections[i] = slices.Insert(s, 1+r.IntN(len(s)), []string{"", "# c", "    # c", "    server x 1.2.3.4:80 # c"}[r.IntN(4)])
	case 9: // a conditional block
		i, s := sec()
		j := 1 + r.IntN(len(s))
		g.sections[i] = slices.Insert(s, j, ".if defined(X)", ".endif")
	case 10: // two sections swapped
		i, j := at(), at()
		g.sections[i], g.sections[j] = g.sections[j], g.sections[i]
	case 11: // the implicit first section
		g.sections[0] = [][]string{{}, {"# generated"}, {"# generated", "foo bar"}, {"", ""}}[r.IntN(4)]
	case 12: // a defaults section renamed, added, removed
		switch r.IntN(3) {
		case 0:
			if i := g.find(r, "defaults"); i > 0 {
				g.sections[i][0] = []string{"defaults d2 from d1", "defaults d3 from d1", "defaults d2", "defaults", "defaults d1"}[r.IntN(5)]
			}
		case 1:
			g.sections = slices.Insert(g.sections, at(), []string{"defaults d3", "    default-server fall 2"})
		default:
			for i := len(g.sections) - 1; i > 0; i-- {
				if strings.HasPrefix(g.sections[i][0], "defaults d3") {
					g.sections = slices.Delete(g.sections, i, i+1)
					break
				}
			}
		}
	case 13: // a section duplicated
		_, s := sec()
		g.sections = slices.Insert(g.sections, at(), slices.Clone(s))
	case 14: // a header written otherwise
		i, s := sec()
		g.sections[i][0] = []string{"  " + s[0], strings.TrimSpace(s[0]) + " # h", strings.TrimSpace(s[0])}[r.IntN(3)]
	case 15:
		g.noEOL = !g.noEOL
	default: // something HAProxy cannot read, in a copy
		i, s := sec()
		s = slices.Clone(s)
		s = slices.Insert(s, 1+r.IntN(len(s)), []string{"    server lonely", "    acl a \"open", "    'x"}[r.IntN(3)])
		g.sections = slices.Clone(g.sections)
		g.sections[i] = s
		return true
	}
	return false
}

// find is a random section whose header starts with prefix, 0 if none.
func (g *genConfig) find(r *rand.Rand, prefix string) int {
	var found []int
	for i, s := range g.sections[1:] {
		if len(s) > 0 && strings.HasPrefix(strings.TrimSpace(s[0]), prefix) {
			found = append(found, i+1)
		}
	}
	if len(found) == 0 {
		return 0
	}
	return found[r.IntN(len(found))]
}

func (g *genConfig) clone() *genConfig {
	c := *g
	c.sections = make([][]string, len(g.sections))
	for i, s := range g.sections {
		c.sections[i] = slices.Clone(s)
	}
	return &c
}

// TestParseAfterRandomEdits: a configuration edited at random, each version read after the
// previous one's ParseAfter (or Parse), is what Parse reads, line numbers and errors included.
func TestParseAfterRandomEdits(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 25))
		g := newGenConfig(r)
		prev, _, err := parseBoth(t, nil, g.text())
		if err != nil {
			t.Fatal(err)
		}
		reused, read := 0, 0
		for range 300 {
			next := g.clone()
			if next.edit(r) {
				parseBoth(t, prev, next.text()) // an error, mostly; prev stays
				continue
			}
			g = next
			c, n, err := parseBoth(t, prev, g.text())
			if err != nil {
				t.Fatal(err)
			}
			reused, read = reused+n, read+len(c.Sections)-n
			prev = c
			if r.IntN(10) == 0 {
				prev, _ = Parse([]byte(g.text()))
			}
		}
		if reused < 2*read {
			t.Errorf("seed %d: %d sections reused, %d read again: reuse is expected for most", seed, reused, read)
		}
	}
}

// TestParseAfterMovedIsPrevs: a section that lines added above moved is prev's section itself,
// not a copy (with 10,000 backends below a line added, a copy of each per change): its lines
// are the Config's.
func TestParseAfterMovedIsPrevs(t *testing.T) {
	body := "frontend fe\n    bind :80\nbackend a\n    server s1 10.0.0.1:80\n    server s2 10.0.0.2:80\nbackend b\n    server s3 10.0.0.3:80\n"
	prev, _, err := parseBoth(t, nil, "global\n    maxconn 10\n"+body)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := parseBoth(t, prev, "global\n    maxconn 10\n# a comment\n\n"+body)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got.Sections[2:] {
		if s != prev.Sections[i+2] {
			t.Errorf("%s is a copy of prev's", s.Key())
		}
	}
	if got.Line(3) != 7 || got.ServerLine(3, got.Sections[3].Servers[1]) != 9 || prev.ServerLine(3, prev.Sections[3].Servers[1]) != 7 {
		t.Errorf("backend a at line %d, its second server at %d (before: %d)", got.Line(3), got.ServerLine(3, got.Sections[3].Servers[1]),
			prev.ServerLine(3, prev.Sections[3].Servers[1]))
	}
}

// TestCommentLinesHaveNoWords: the words a section reads of a line (comment lines skipped
// without reading them) are Words' up to the first comment word, for lines of every kind.
func TestCommentLinesHaveNoWords(t *testing.T) {
	lines := []string{"# c", "#", "  # c", "\t#c d", "\r # 'it's", " \t\r#", "", "  ", "a # c", "  a#b c", `"#" x`,
		`\# x`, "'a b' # c", "x", " server s 1.2.3.4:80 # c", "#x 'y", "  #\"open"}
	p := &parser{}
	for _, l := range lines {
		want, werr := Words(l)
		if i := slices.IndexFunc(want, func(w string) bool { return strings.HasPrefix(w, "#") }); i >= 0 {
			want = want[:i]
		}
		got, gerr := p.words(l)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || len(got)+len(want) > 0 && !slices.Equal(got, want) {
			t.Errorf("words of %q: %q %v, want %q %v", l, got, gerr, want, werr)
		}
	}
}

// TestParseAfterRunOneByte: among many sections a rendering repeats in order (taken by their
// bytes alone, matcher.repeated), one that differs by one byte (anywhere in it: its header,
// a line, its last newline's place) is read again, and every other one is prev's.
func TestParseAfterRunOneByte(t *testing.T) {
	var s strings.Builder
	s.WriteString("global\n    maxconn 10\ndefaults\n    mode http\n")
	for i := range 50 {
		fmt.Fprintf(&s, "backend be_%d\n    balance roundrobin\n    server s%d 10.0.0.%d:80\n", i, i, i+1)
	}
	text := s.String()
	prev, _, err := parseBoth(t, nil, text)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(text, "backend be_25\n")
	for _, edit := range []struct{ name, from, to string }{
		{"header", "backend be_25\n", "backend be_2X\n"},
		{"line", "    balance roundrobin\n    server s25", "    balance roundrobiN\n    server s25"},
		{"server", "10.0.0.26:80\n", "10.0.0.26:81\n"},
		{"line added at its end", "10.0.0.26:80\n", "10.0.0.26:80\n    maxconn 5\n"},
	} {
		i := strings.Index(text[at:], edit.from)
		if i < 0 {
			t.Fatalf("%s: %q not found", edit.name, edit.from)
		}
		next := text[:at+i] + edit.to + text[at+i+len(edit.from):]
		got, _, err := parseBoth(t, prev, next)
		if err != nil {
			t.Fatal(err)
		}
		for j := 1; j < len(got.Sections); j++ { // 0, the lines before global: none, read again
			sec := got.Sections[j]
			if changed := j == 28; (sec == prev.Sections[j]) == changed {
				t.Errorf("%s: section %d (%s) is prev's: %v", edit.name, j, sec.Key(), !changed)
			}
		}
	}
}
