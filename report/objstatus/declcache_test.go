package objstatus

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// referenceParse is Parse as it was before declarationLines: a line scanner over every line.
// The incremental path is checked against it.
func referenceParse(cfg []byte) (decls []Declaration, problems []error) {
	sc := bufio.NewScanner(bytes.NewReader(cfg))
	sc.Buffer(make([]byte, 0, 64*1024), len(cfg)+1)
	prefix := []byte(Prefix)
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimLeft(sc.Bytes(), " \t")
		r, ok := bytes.CutPrefix(b, []byte("#"))
		if !ok || !bytes.HasPrefix(bytes.TrimLeft(r, " \t"), prefix) {
			continue
		}
		line := string(b)
		rest, _ := strings.CutPrefix(line, "#")
		rest, _ = strings.CutPrefix(strings.TrimLeft(rest, " \t"), Prefix)
		d, err := parseDeclaration(rest)
		if err != nil {
			problems = append(problems, fmt.Errorf("haproxy.cfg line %d: %q: %w", n, line, err))
			continue
		}
		d.Line = n
		decls = append(decls, d)
	}
	return decls, problems
}

// referenceCollect is Collect as it was before declKey: keyed by the string a declaration is
// of.
func referenceCollect(decls []Declaration) (map[Object]Want, []error) {
	out := map[Object]Want{}
	first := map[string]Declaration{}
	var problems []error
	for _, d := range decls {
		key := d.Object.String()
		switch {
		case d.Kind == KindHTTPRoute:
			key += " parent " + d.Parent.String()
		case d.Listener != "":
			key += " listener " + d.Listener
		}
		if prev, ok := first[key]; ok {
			if !sameDeclaration(prev, d) {
				problems = append(problems, fmt.Errorf("haproxy.cfg line %d: %s declared again, differently (line %d stands)", d.Line, key, prev.Line))
			}
			continue
		}
		first[key] = d
		w, seen := out[d.Object]
		if seen && w.Generation != d.Generation {
			line := 0
			for _, f := range first {
				if f.Object == d.Object && (line == 0 || f.Line < line) {
					line = f.Line
				}
			}
			problems = append(problems, fmt.Errorf("haproxy.cfg line %d: %s: generation %d, line %d said %d (the first stands)", d.Line, d.Object, d.Generation, line, w.Generation))
		}
		if !seen {
			w.Generation = d.Generation
		}
		switch {
		case d.Listener != "":
			w.Listeners = append(w.Listeners, ListenerWant{Name: d.Listener, Conditions: d.Conditions, Attached: d.Attached, Kinds: d.Kinds})
		case d.Kind == KindGateway || d.Kind == KindGatewayClass:
			w.Conditions, w.Addresses = d.Conditions, d.Addresses
		case d.Kind == KindHTTPRoute:
			w.Parents = append(w.Parents, ParentWant{Parent: d.Parent, Conditions: d.Conditions})
		case d.Kind == KindIngress:
			w.Warning, w.WarningReason = d.Warning, d.WarningReason
		}
		out[d.Object] = w
	}
	for o, w := range out {
		if o.Kind == KindGateway && w.Conditions == nil {
			w.Conditions = defaultConditions(KindGateway)
			out[o] = w
		}
	}
	return out, problems
}

// referenceFingerprint is Writer.fingerprint as it was before the prints were kept.
func referenceFingerprint(w *Writer, o Object, want Want) string {
	publishing := w.cfg.PublishService != "" || len(w.cfg.PublishAddresses) > 0
	switch o.Kind {
	case KindIngress:
		if !publishing || !w.known {
			return ""
		}
		return fmt.Sprint(w.addrs)
	case KindGateway:
		if publishing && !w.known {
			return ""
		}
		return fmt.Sprint(want, w.addrs)
	}
	return fmt.Sprint(want)
}

// declarationPool are the lines a random haproxy.cfg is made of: declarations of each kind,
// the same ones spaced otherwise, ones that repeat or contradict others (Collect's problems),
// bad ones (Parse's problems), and lines that hold the prefix without being declarations.
var declarationPool = []string{
	"# haproxy-sidecar: serves Ingress web/a",
	"#haproxy-sidecar: serves Ingress web/a",
	"\t # haproxy-sidecar:\tserves Ingress web/a  ",
	`# haproxy-sidecar: serves Ingress web/b warning="annotation x: not supported" warning.reason=UnsupportedAnnotation`,
	`# haproxy-sidecar: serves Ingress web/b warning="another"`,
	"# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=1",
	"# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=2",
	"# haproxy-sidecar: serves Gateway lb/gw generation=2 accepted programmed addresses=10.0.0.1,lb.example.com",
	"# haproxy-sidecar: serves Gateway lb/gw generation=2 programmed=false reason=Invalid",
	"# haproxy-sidecar: serves Gateway lb/gw generation=3",
	`# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=http attached=2 kinds="HTTPRoute"`,
	`# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=http attached=3 kinds="HTTPRoute"`,
	`# haproxy-sidecar: serves Gateway lb/gw generation=2 listener=udp attached=0 kinds="" accepted=false accepted.reason=UnsupportedProtocol`,
	"# haproxy-sidecar: serves Gateway lb/other listener=http attached=1 kinds=HTTPRoute,example.com/FooRoute",
	"# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=http accepted resolved",
	"# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=https port=443",
	`# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=http resolved=false reason=BackendNotFound message="rule 1: Service web/x not found"`,
	"# haproxy-sidecar: serves HTTPRoute web/r generation=5 parent=lb/other",
	"# haproxy-sidecar: serves HTTPRoute web/s parent=lb/gw accepted=false accepted.reason=NotAllowedByListeners",
	"# haproxy-sidecar: serves HTTPRoute web/s parent=lb/gw",
	"# haproxy-sidecar: serves HTTPRoute web/t generation=1 parent=lb/gw",
	"# haproxy-sidecar: serves HTTPRoute web/u generation=1 parent=lb/gw",
	// Bad: each a problem naming its line, quoting it as spaced.
	"# haproxy-sidecar: serves HTTPRoute web/r accepted",
	"#haproxy-sidecar: serves HTTPRoute web/r accepted",
	"  # haproxy-sidecar: serves HTTPRoute web/r accepted",
	"# haproxy-sidecar: serves Service web/a",
	"# haproxy-sidecar: serves Gateway lb/gw generation=0",
	`# haproxy-sidecar: serves Gateway lb/gw programmed=false reason=Invalid message="a b`,
	"# haproxy-sidecar:",
	// Not declarations.
	"# haproxy-sidecar is great",
	"  http-request set-header X haproxy-sidecar: serves Ingress web/a",
	"  # note: haproxy-sidecar: serves Ingress web/a",
	"backend web_a haproxy-sidecar: haproxy-sidecar:",
	"",
	"frontend http",
	"  bind :80",
}

// randomConfig joins lines as haproxy.cfg, some ending with \r\n, the last one sometimes
// without a line end.
func randomConfig(r *rand.Rand, lines []string) []byte {
	var b bytes.Buffer
	for i, l := range lines {
		b.WriteString(l)
		switch {
		case i == len(lines)-1 && r.IntN(3) == 0:
		case r.IntN(8) == 0:
			b.WriteString("\r\n")
		default:
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// mutate changes lines as a rendering does: a line added, removed, changed, moved or
// repeated.
func mutate(r *rand.Rand, lines []string) []string {
	pick := func() string { return declarationPool[r.IntN(len(declarationPool))] }
	for range 1 + r.IntN(3) {
		if len(lines) == 0 {
			lines = append(lines, pick())
			continue
		}
		i := r.IntN(len(lines))
		switch r.IntN(5) {
		case 0:
			lines = append(lines[:i], append([]string{pick()}, lines[i:]...)...)
		case 1:
			lines = append(lines[:i], lines[i+1:]...)
		case 2:
			lines[i] = pick()
		case 3:
			j := r.IntN(len(lines))
			lines[i], lines[j] = lines[j], lines[i]
		case 4:
			lines = append(lines[:i], append([]string{lines[i]}, lines[i:]...)...)
		}
	}
	return lines
}

func errorStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestIncrementalMatchesFresh: over random sequences of renderings (lines added, removed,
// changed, moved, repeated; bad declarations among them), what the Writer reads of each
// (declCache, Collect, what changed) is exactly what a fresh read gives: the declarations
// with their line numbers, the problems naming the right lines, the wants, the objects whose
// declaration changed.
func TestIncrementalMatchesFresh(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 25))
		w := &Writer{log: slog.New(slog.DiscardHandler)}
		w.reset()
		switch seed % 3 { // the fingerprints of Ingresses and Gateways differ with these
		case 1:
			w.cfg.PublishService = "lb/haproxy"
		case 2:
			w.cfg.PublishAddresses = []string{"203.0.113.7"}
		}
		var lines []string
		var prevWants map[Object]Want
		for step := range 150 {
			lines = mutate(r, lines)
			cfg := randomConfig(r, lines)
			where := fmt.Sprintf("seed %d, step %d:\n%s", seed, step, cfg)

			wantDecls, wantProblems := referenceParse(cfg)
			decls, problems := w.decls.parse(cfg)
			if len(decls) != len(wantDecls) || len(decls) > 0 && !reflect.DeepEqual(decls, wantDecls) {
				t.Fatalf("%s\ndeclarations %+v\nwant %+v", where, decls, wantDecls)
			}
			if got, want := errorStrings(problems), errorStrings(wantProblems); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s\nproblems %q\nwant %q", where, got, want)
			}
			if d, p := Parse(cfg); len(d) != len(wantDecls) || len(d) > 0 && !reflect.DeepEqual(d, wantDecls) || !reflect.DeepEqual(errorStrings(p), errorStrings(wantProblems)) {
				t.Fatalf("%s\nParse %+v %q\nwant %+v %q", where, d, errorStrings(p), wantDecls, errorStrings(wantProblems))
			}

			wantWants, wantMore := referenceCollect(wantDecls)
			wants, more := collectWants(decls)
			if !reflect.DeepEqual(wants, wantWants) || !reflect.DeepEqual(errorStrings(more), errorStrings(wantMore)) {
				t.Fatalf("%s\nCollect %+v %q\nwant %+v %q", where, wants, errorStrings(more), wantWants, errorStrings(wantMore))
			}

			w.declared(&render.Bundle{Config: cfg, Hash: fmt.Sprint(step)})
			wantFresh := map[Object]bool{}
			for o, want := range wantWants {
				if old, ok := prevWants[o]; !ok || !reflect.DeepEqual(old, want) && fmt.Sprint(old) != fmt.Sprint(want) {
					wantFresh[o] = true
				}
			}
			if fresh := freshOf(w); !reflect.DeepEqual(fresh, wantFresh) || !reflect.DeepEqual(wantsOf(w.wants), wantWants) {
				t.Fatalf("%s\nfresh %v, want %v", where, fresh, wantFresh)
			}
			for o, p := range w.wants {
				if p != nil && zeroWant(*p) {
					t.Fatalf("%s\nthe zero Want of %s kept as a Want, not nil", where, o)
				}
			}
			warned := map[string]bool{}
			for _, p := range append(wantProblems, wantMore...) {
				warned[p.Error()] = true
			}
			if !reflect.DeepEqual(w.warned, warned) {
				t.Fatalf("%s\nwarned %v, want %v", where, w.warned, warned)
			}
			if step%10 == 3 {
				w.setAddrs(Addresses([]string{"203.0.113.7", fmt.Sprintf("lb%d.example.com", step)}))
			}
			for o, want := range wantWants {
				if got, want := w.fingerprint(o), referenceFingerprint(w, o, want); got != want {
					t.Fatalf("%s\nthe fingerprint of %s: %q, want %q", where, o, got, want)
				}
			}
			prevWants = wantWants
		}
	}
}

// freshOf is the set of objects w takes as fresh (w.fresh nil: all it wants).
func freshOf(w *Writer) map[Object]bool {
	if w.fresh != nil {
		return w.fresh
	}
	out := map[Object]bool{}
	for o := range w.wants {
		out[o] = true
	}
	return out
}

// wantsOf is s as Collect gives it.
func wantsOf(s wantSet) map[Object]Want {
	out := make(map[Object]Want, len(s))
	for o := range s {
		out[o] = s.get(o)
	}
	return out
}

// TestZeroWant: zeroWant is reflection's IsZero, for the zero Want, random ones and those with
// one field set.
func TestZeroWant(t *testing.T) {
	if n := reflect.TypeFor[Want]().NumField(); n != 7 {
		t.Fatalf("Want has %d fields, zeroWant knows of 7: check the new ones there", n)
	}
	wants := []Want{{}, {Generation: 1}, {Conditions: []Condition{}}, {Addresses: []Address{}}, {Listeners: []ListenerWant{}},
		{Parents: []ParentWant{}}, {Warning: "w"}, {WarningReason: "r"}}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		wants = append(wants, randomWant(r))
	}
	for _, w := range wants {
		if got, want := zeroWant(w), reflect.ValueOf(w).IsZero(); got != want {
			t.Fatalf("zeroWant(%#v) = %v, want %v", w, got, want)
		}
	}
}

// randomWant is a Want from a small space of values, so that two are often equal, with nil
// and empty slices both.
func randomWant(r *rand.Rand) Want {
	conds := func() []Condition {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []Condition{}
		case 2:
			return []Condition{accepted()}
		}
		return []Condition{accepted(), {Type: ResolvedRefs, Reason: []string{"A", "B"}[r.IntN(2)]}}
	}
	some := func() bool { return r.IntN(2) == 0 }
	w := Want{Generation: int64(r.IntN(2)), Conditions: conds(), Warning: []string{"", "w"}[r.IntN(2)], WarningReason: []string{"", "R"}[r.IntN(2)]}
	if some() {
		w.Addresses = [][]Address{{}, {{IP: "10.0.0.1"}}, {{Hostname: "a"}}}[r.IntN(3)]
	}
	if some() {
		w.Listeners = []ListenerWant{}
		for range r.IntN(3) {
			l := ListenerWant{Name: []string{"a", "b"}[r.IntN(2)], Attached: int32(r.IntN(2)), Conditions: conds()}
			if some() {
				l.Kinds = [][]RouteKind{{}, {{gatewayGroup, KindHTTPRoute}}, {{"x", "Y"}}}[r.IntN(3)]
			}
			w.Listeners = append(w.Listeners, l)
		}
	}
	if some() {
		w.Parents = []ParentWant{}
		for range r.IntN(3) {
			w.Parents = append(w.Parents, ParentWant{Parent: Parent{"lb", []string{"gw", "other"}[r.IntN(2)], "", int32(r.IntN(2))}, Conditions: conds()})
		}
	}
	return w
}

// TestSameWant: sameWant is reflect.DeepEqual, over random pairs of Wants (and a Want with
// itself, sharing its slices); it fails when a field is added to Want or to what it holds,
// which sameWant would have to compare too.
func TestSameWant(t *testing.T) {
	fields := map[reflect.Type]int{
		reflect.TypeFor[Want](): 7, reflect.TypeFor[ListenerWant](): 4, reflect.TypeFor[ParentWant](): 2,
		reflect.TypeFor[Condition](): 4, reflect.TypeFor[Address](): 2, reflect.TypeFor[RouteKind](): 2, reflect.TypeFor[Parent](): 4,
	}
	for typ, n := range fields {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, sameWant knows of %d: compare the new ones there", typ, typ.NumField(), n)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	equal := 0
	for i := range 20000 {
		a := randomWant(r)
		var b Want
		switch i % 3 {
		case 0:
			b = randomWant(r)
		case 1:
			b = cloneWant(a)
		case 2:
			b = changeWant(r, cloneWant(a))
		}
		if i%5 == 0 {
			b = a // the same slices
		}
		want := reflect.DeepEqual(a, b)
		if got := sameWant(a, b); got != want {
			t.Fatalf("sameWant(%#v, %#v) = %v, DeepEqual says %v", a, b, got, want)
		}
		if want {
			equal++
		}
	}
	if equal < 5000 || equal > 15000 {
		t.Errorf("%d of 20,000 pairs equal: the pairs do not test both outcomes", equal)
	}
}

// cloneWant is a copy of w sharing no slice with it (nil ones stay nil, empty ones empty).
func cloneWant(w Want) Want {
	w.Conditions, w.Addresses = slices.Clone(w.Conditions), slices.Clone(w.Addresses)
	w.Listeners, w.Parents = slices.Clone(w.Listeners), slices.Clone(w.Parents)
	for i := range w.Listeners {
		w.Listeners[i].Conditions, w.Listeners[i].Kinds = slices.Clone(w.Listeners[i].Conditions), slices.Clone(w.Listeners[i].Kinds)
	}
	for i := range w.Parents {
		w.Parents[i].Conditions = slices.Clone(w.Parents[i].Conditions)
	}
	return w
}

// changeWant changes one thing of w (a copy): a field, an element, or a nil slice to an empty
// one and back.
func changeWant(r *rand.Rand, w Want) Want {
	switch r.IntN(9) {
	case 0:
		w.Generation++
	case 1:
		w.Warning += "x"
	case 2:
		w.WarningReason += "x"
	case 3:
		w.Conditions = changeSlice(r, w.Conditions, func(c *Condition) { c.True = !c.True })
	case 4:
		w.Addresses = changeSlice(r, w.Addresses, func(a *Address) { a.Hostname += "x" })
	case 5:
		w.Listeners = changeSlice(r, w.Listeners, func(l *ListenerWant) {
			switch r.IntN(4) {
			case 0:
				l.Name += "x"
			case 1:
				l.Attached++
			case 2:
				l.Conditions = changeSlice(r, l.Conditions, func(c *Condition) { c.Message += "x" })
			case 3:
				l.Kinds = changeSlice(r, l.Kinds, func(k *RouteKind) { k.Group += "x" })
			}
		})
	case 6:
		w.Parents = changeSlice(r, w.Parents, func(p *ParentWant) { p.Parent.Port++ })
	case 7:
		w.Parents = changeSlice(r, w.Parents, func(p *ParentWant) {
			p.Conditions = changeSlice(r, p.Conditions, func(c *Condition) { c.Type += "x" })
		})
	case 8:
		w.Parents = changeSlice(r, w.Parents, func(p *ParentWant) { p.Parent.Section += "x" })
	}
	return w
}

// changeSlice changes one element of s, or makes an empty s nil and a nil one empty.
func changeSlice[T any](r *rand.Rand, s []T, change func(*T)) []T {
	switch {
	case s == nil:
		return []T{}
	case len(s) == 0:
		return nil
	}
	change(&s[r.IntN(len(s))])
	return s
}

// FuzzParseLines: Parse (declarationLines) finds the lines the former line scanner found, with
// their numbers, in any input: \r, lines without an end, the prefix anywhere.
func FuzzParseLines(f *testing.F) {
	for _, s := range []string{"", "\n", "# haproxy-sidecar: serves Ingress web/a", "\r\n# haproxy-sidecar: serves Ingress web/a\r\r\n",
		"x haproxy-sidecar: haproxy-sidecar:\n #haproxy-sidecar:haproxy-sidecar:\n", "#haproxy-sidecar:\n\n\t# haproxy-sidecar: serves Gateway lb/gw\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, cfg []byte) {
		want, wantProblems := referenceParse(cfg)
		got, problems := Parse(cfg)
		if len(got) != len(want) || len(got) > 0 && !reflect.DeepEqual(got, want) || !reflect.DeepEqual(errorStrings(problems), errorStrings(wantProblems)) {
			t.Fatalf("Parse(%q) = %+v %q\nwant %+v %q", cfg, got, errorStrings(problems), want, errorStrings(wantProblems))
		}
		var c declCache
		for range 2 { // parsed, then from the cache
			got, problems = c.parse(cfg)
			if len(got) != len(want) || len(got) > 0 && !reflect.DeepEqual(got, want) || !reflect.DeepEqual(errorStrings(problems), errorStrings(wantProblems)) {
				t.Fatalf("declCache.parse(%q) = %+v %q\nwant %+v %q", cfg, got, errorStrings(problems), want, errorStrings(wantProblems))
			}
		}
	})
}

// TestParsedLineCompact: a declaration that says nothing but its object is kept as the object
// alone, any other whole; either way what is read back (the declaration, its key, its
// object) is what was parsed.
func TestParsedLineCompact(t *testing.T) {
	compact := 0
	for _, line := range declarationPool {
		b := bytes.TrimLeft([]byte(line), " \t")
		if !bytes.HasPrefix(b, []byte("#")) {
			continue
		}
		d, err := parseDeclaration(declarationText(string(b)))
		if err != nil {
			continue
		}
		p := newParsedLine(d)
		if got := p.declaration(); !reflect.DeepEqual(got, d) {
			t.Errorf("%s: read back %+v, want %+v", line, got, d)
		}
		if p.key() != keyOf(&d) || p.object() != d.Object {
			t.Errorf("%s: key %v object %v, want %v %v", line, p.key(), p.object(), keyOf(&d), d.Object)
		}
		bare := d.Kind == KindIngress && d.Warning == ""
		if (p.more == nil) != bare {
			t.Errorf("%s: kept whole %v, want %v", line, p.more != nil, !bare)
		}
		if p.more == nil {
			compact++
		}
	}
	if compact == 0 {
		t.Fatal("no declaration kept compact")
	}
}
