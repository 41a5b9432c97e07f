package runtimeapi

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// freshPlan is the plan made with nothing reused: the rendering read by Parse, so that no
// section of it is one of live's and the differ compares them all, against a configuration
// that does not say its backends' names are unique, so that the differ finds each by name.
func freshPlan(live *Model, config []byte, d dirs) *Plan {
	cfg, err := cfgparse.Parse(config)
	if err != nil {
		return &Plan{base: live, reason: fmt.Sprintf("the rendered configuration cannot be compared: %v", err)}
	}
	old := live.clone()
	old.cfg = &cfgparse.Config{Sections: live.cfg.Sections, Conditional: live.cfg.Conditional, Lines: live.cfg.Lines}
	return planTo(old, &Model{cfg: cfg}, d)
}

// sectionView is what a section says, without what cfgparse keeps to reuse it.
type sectionView struct {
	Kind, Name, From string
	Header, Lines    []string
	Line             int
	Servers          []*cfgparse.Server
	ServerLines      []int
}

func configView(c *cfgparse.Config) any {
	if c == nil {
		return nil
	}
	out := []any{c.Conditional}
	for i, s := range c.Sections {
		var lines []int
		for _, sv := range s.Servers {
			lines = append(lines, c.ServerLine(i, sv))
		}
		out = append(out, sectionView{s.Kind, s.Name, s.From, s.Header, s.Lines, c.Line(i), s.Servers, lines})
	}
	return out
}

func modelView(m *Model) any {
	if m == nil {
		return nil
	}
	return []any{configView(m.cfg), m.zombies, m.gone, m.pid, m.version}
}

// samePlans fails unless two plans make the same commands for the same reason, towards the
// same state.
func samePlans(t *testing.T, got, want *Plan, text string) {
	t.Helper()
	if got.Reload() != want.Reload() || !slices.Equal(got.Commands(), want.Commands()) || !reflect.DeepEqual(got.Counts(), want.Counts()) {
		t.Fatalf("plan %q %q, with nothing reused %q %q\n%s", got.Reload(), got.Commands(), want.Reload(), want.Commands(), text)
	}
	if !reflect.DeepEqual(modelView(got.target), modelView(want.target)) {
		t.Fatalf("the plans' targets differ\n%s", text)
	}
	if !reflect.DeepEqual(modelView(got.Loaded()), modelView(want.Loaded())) {
		t.Fatalf("the plans' renderings differ\n%s", text)
	}
}

// genRendering is a rendering routed through a map, edited at random.
type genRendering struct {
	backends [][]string // each a header and its lines
	defaults string     // the default-server line of defaults web
	frontend string     // a line of the frontend
	next     int
}

func (g *genRendering) text() []byte {
	var b strings.Builder
	b.WriteString("global\n    maxconn 100\ndefaults web\n    mode http\n    " + g.defaults + "\n")
	b.WriteString("frontend fe\n    bind :80\n    use_backend %[req.hdr(host),lower,map(" + routes + ",be_default)]\n    " + g.frontend + "\n")
	for _, be := range g.backends {
		b.WriteString(strings.Join(be, "\n") + "\n")
	}
	return []byte(b.String())
}

func (g *genRendering) backend(r *rand.Rand) []string {
	g.next++
	be := []string{fmt.Sprintf("backend be_%d", g.next)}
	for i := range 1 + r.IntN(3) {
		be = append(be, server(r, i))
	}
	return be
}

func server(r *rand.Rand, i int) string {
	return fmt.Sprintf("    server s%d 10.0.%d.%d:%d check weight %d", i, r.IntN(3), 1+r.IntN(3), 80+r.IntN(2), 1+r.IntN(3))
}

func (g *genRendering) edit(r *rand.Rand) {
	be := func() int { return r.IntN(len(g.backends)) }
	switch r.IntN(13) {
	case 0, 1, 2, 3: // a server changed, added or removed
		i := be()
		s := g.backends[i]
		j := 1 + r.IntN(len(s))
		switch {
		case j < len(s) && r.IntN(3) == 0 && len(s) > 2:
			g.backends[i] = slices.Delete(s, j, j+1)
		case j < len(s) && r.IntN(2) == 0:
			s[j] = server(r, j-1)
		default:
			g.backends[i] = slices.Insert(s, j, server(r, 7+r.IntN(3)))
		}
	case 4: // a backend added, anywhere
		g.backends = slices.Insert(g.backends, r.IntN(len(g.backends)+1), g.backend(r))
	case 5: // a backend removed
		if len(g.backends) > 2 {
			i := be()
			g.backends = slices.Delete(g.backends, i, i+1)
		}
	case 6: // what every server inherits
		g.defaults = fmt.Sprintf("default-server inter %ds", 1+r.IntN(2))
	case 7: // a line a reload is needed for
		g.frontend = []string{"default_backend be_0", "timeout client 5s"}[r.IntN(2)]
	case 8: // a conditional block around a server
		i := be()
		g.backends[i] = slices.Insert(g.backends[i], 1, ".if defined(X)", ".endif")
	case 9: // comments and blank lines
		i := be()
		g.backends[i] = slices.Insert(g.backends[i], 1+r.IntN(len(g.backends[i])), []string{"", "    # c"}[r.IntN(2)])
	case 10: // a default-server line in a backend
		i := be()
		g.backends[i] = slices.Insert(g.backends[i], 1, "    default-server fall 2")
	case 11: // a backend written twice (HAProxy refuses it, the plan must stay the same)
		if r.IntN(3) == 0 {
			g.backends = slices.Insert(g.backends, r.IntN(len(g.backends)+1), slices.Clone(g.backends[be()]))
		} else if len(g.backends) > 2 {
			i := be()
			g.backends = slices.Delete(g.backends, i, i+1)
		}
	default: // two backends swapped
		i, j := be(), be()
		g.backends[i], g.backends[j] = g.backends[j], g.backends[i]
	}
}

func (g *genRendering) clone() *genRendering {
	c := *g
	c.backends = make([][]string, len(g.backends))
	for i, b := range g.backends {
		c.backends[i] = slices.Clone(b)
	}
	return &c
}

// TestPlanAfterRandomEdits: the plan made against what HAProxy runs, which reuses its sections
// and skips them, is the plan made with nothing reused, over random edits of a rendering, what
// HAProxy runs following each plan as after a reload, a successful update, or one that left
// servers behind (zombies).
func TestPlanAfterRandomEdits(t *testing.T) {
	d := dirs{ssl: ssl, maps: mapsDir}
	version := parseVersion("3.4.7-1")
	skipped := 0
	sum := sha256.New() // of every plan: the differ itself is compared with what it was
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 25))
		g := &genRendering{defaults: "default-server inter 2s", frontend: "default_backend be_0"}
		for range 8 {
			g.backends = append(g.backends, g.backend(r))
		}
		live := plan(nil, g.text(), nil, nil, d).Loaded()
		live.version = version
		for range 200 {
			g = g.clone()
			g.edit(r)
			text := g.text()
			p := plan(live, text, nil, nil, d)
			samePlans(t, p, freshPlan(live, text, d), string(text))
			fmt.Fprintf(sum, "%q %q %s\n", p.Reload(), p.Commands(), targetText(p.target))
			for _, s := range p.full.cfg.Sections {
				if slices.ContainsFunc(live.cfg.Sections, func(o *cfgparse.Section) bool { return cfgparse.Unchanged(o, s) }) {
					skipped++
				}
			}
			switch r.IntN(4) {
			case 0: // reloaded
				live = p.Loaded()
				live.version = version
			case 1: // a server left behind
				live = p.target.clone()
				if bs := live.cfg.Sections; len(bs) > 4 {
					be := bs[4+r.IntN(len(bs)-4)].Name
					live.zombies[be] = map[string]*cfgparse.Server{"z": {Name: "z", Address: "10.9.9.9:80"}}
				}
			default: // updated at runtime (or, with a reason, partly: servers, certificates, maps)
				live = p.target
			}
		}
	}
	// What the plans were before ParseAfter (main at 77f70ee).
	if got := fmt.Sprintf("%x", sum.Sum(nil)); got != plansBefore {
		t.Errorf("the plans are not those made before: sum %s", got)
	}
	if skipped < 1000 {
		t.Errorf("only %d sections were reused: the test compares little", skipped)
	}
}

// plansBefore is the sum of TestPlanAfterRandomEdits's plans made by the differ before
// ParseAfter.
const plansBefore = "8cbccfde4c502612b604fe99d2ae62531e9e93a590e7f880e6d5991cecf029da"

// targetText is what HAProxy runs after a plan, as text: its sections and servers.
func targetText(m *Model) string {
	var b strings.Builder
	for i, s := range m.cfg.Sections {
		fmt.Fprintf(&b, "%s@%d %q;", s.Key(), m.cfg.Line(i), s.Lines)
		for _, sv := range s.Servers {
			fmt.Fprintf(&b, " %s %s %q %q@%d", sv.Name, sv.Address, sv.Params, sv.Inherited, m.cfg.ServerLine(i, sv))
		}
	}
	for _, be := range sortedKeys(m.zombies) {
		fmt.Fprintf(&b, " zombies %s %q", be, sortedKeys(m.zombies[be]))
	}
	fmt.Fprintf(&b, " gone %q", sortedKeys(m.gone))
	return b.String()
}

// TestPlanTwoBackendsOfOneName: HAProxy refuses two backends of one name, but the plan stays
// what it was: each new one compared with the last old one of its name, the last one's servers
// taken for both in what HAProxy runs after a partial update, whichever of them was reused.
func TestPlanTwoBackendsOfOneName(t *testing.T) {
	d := dirs{ssl: ssl, maps: mapsDir}
	head := "global\n    maxconn 100\ndefaults web\n    mode http\nbackend other\n    server o 10.0.9.1:80\n"
	b1, b2 := "backend b\n    server s1 10.0.0.1:80\n", "backend b\n    server s2 10.0.0.2:80\n"
	changed := "backend b\n    server s1 10.0.0.3:80\n"
	cases := []struct{ name, prev, next string }{
		{"the first changed", head + b1 + b2, head + changed + b2},
		{"the last changed", head + b1 + b2, head + b1 + changed},
		{"another backend changed", head + b1 + b2, strings.Replace(head, "10.0.9.1", "10.0.9.2", 1) + b1 + b2},
		{"a third one", head + b1 + b2, head + b1 + b2 + changed},
		{"one of them removed", head + b1 + b2, head + b2},
		{"written once, then twice", head + b1, head + b1 + b2},
		{"written twice, then once", head + b1 + b2, head + b1},
	}
	// The plans made before ParseAfter, in the order made below.
	golden := [][2]string{
		{"", "add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"", "add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"defaults \"web\": a \"mode\" line changed", "add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"defaults \"web\": a \"mode\" line changed", "add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"", "add server b/s1 10.0.0.1:80; enable server b/s1; add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2; set server b/s2 state maint; del server b/s2"},
		{"", "set server b/s1 addr 10.0.0.1 port 80"},
		{"defaults \"web\": a \"mode\" line changed", "add server b/s1 10.0.0.1:80; enable server b/s1; add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2; set server b/s2 state maint; del server b/s2"},
		{"defaults \"web\": a \"mode\" line changed", "set server b/s1 addr 10.0.0.1 port 80"},
		{"", "add server b/s1 10.0.0.1:80; enable server b/s1; set server other/o addr 10.0.9.2 port 80; set server b/s2 state maint; del server b/s2"},
		{"", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"defaults \"web\": a \"mode\" line changed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server other/o addr 10.0.9.2 port 80; set server b/s2 state maint; del server b/s2"},
		{"defaults \"web\": a \"mode\" line changed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", "add server b/s2 10.0.0.2:80; enable server b/s2; set server b/s1 addr 10.0.0.1 port 80; set server b/s1 state maint; del server b/s1"},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; add server b/s1 10.0.0.3:80; enable server b/s1; set server b/s2 state maint; del server b/s2; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", "add server b/s2 10.0.0.2:80; enable server b/s2; set server b/s1 addr 10.0.0.1 port 80; set server b/s1 state maint; del server b/s1"},
		{"sections were added or removed", ""},
		{"sections were added or removed", ""},
		{"sections were added or removed", ""},
		{"sections were added or removed", ""},
		{"sections were added or removed", "add server b/s2 10.0.0.2:80; enable server b/s2; set server b/s1 state maint; del server b/s1"},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", "add server b/s2 10.0.0.2:80; enable server b/s2; set server b/s1 state maint; del server b/s1"},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", ""},
		{"sections were added or removed", "add server b/s1 10.0.0.1:80; enable server b/s1; set server b/s2 state maint; del server b/s2"},
		{"sections were added or removed", ""},
	}
	for _, c := range cases {
		for _, reload := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, reload %v", c.name, reload), func(t *testing.T) {
				next := c.next
				if reload { // a partial update: what HAProxy runs then is patched (no line moved)
					next = strings.Replace(next, "    mode http\n", "    mode tcp\n", 1)
				}
				live := plan(nil, []byte(c.prev), nil, nil, d).Loaded()
				live.version = parseVersion("3.4.7-1")
				for range 2 { // then against the plan's target
					p := plan(live, []byte(next), nil, nil, d)
					samePlans(t, p, freshPlan(live, []byte(next), d), next)
					// The differ itself, against what it made before ParseAfter (main at
					// 77f70ee): freshPlan runs the same differ.
					if want := golden[0]; p.Reload() != want[0] || strings.Join(p.Commands(), "; ") != want[1] {
						t.Errorf("plan %q %q, before %q %q", p.Reload(), p.Commands(), want[0], want[1])
					}
					golden = golden[1:]
					live = p.target
				}
			})
		}
	}
}
