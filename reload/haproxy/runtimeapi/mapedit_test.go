package runtimeapi

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

func TestEntryEdits(t *testing.T) {
	const m = "# routes\na.example/ be_a\nb.example/ be_b\nc.example/ be_c\n"
	var many strings.Builder
	for i := range maxMapEdits + 1 {
		fmt.Fprintf(&many, "h%03d.example/ be_h\n", i)
	}
	cases := []struct {
		name     string
		old, new string
		want     string // the edits' lines for path /m, one a line; "" for none
		same, ok bool
	}{
		{name: "an entry added in the middle", old: m, new: strings.Replace(m, "b.example/ be_b\n", "b.example/ be_b\nbb.example/ be_bb\n", 1),
			want: "add map /m bb.example/ be_bb", ok: true},
		{name: "an entry added first", old: m, new: strings.Replace(m, "# routes\n", "# routes\n0.example/ be_0\n", 1), want: "add map /m 0.example/ be_0", ok: true},
		{name: "an entry added last", old: m, new: m + "d.example/ be_d\n", want: "add map /m d.example/ be_d", ok: true},
		{name: "added after a last line without a newline: that line is set again", old: "a 1", new: "a 1\nb 2", want: "add map /m b 2", ok: true},
		{name: "added to an empty map", old: "", new: "a 1\n", want: "add map /m a 1", ok: true},
		{name: "an entry deleted", old: m, new: strings.Replace(m, "b.example/ be_b\n", "", 1), want: "del map /m b.example/", ok: true},
		{name: "the last entry deleted", old: "a 1\n", new: "# none\n", want: "del map /m a", ok: true},
		{name: "a value changed", old: m, new: strings.Replace(m, "be_b", "be_x", 1), want: "set map /m b.example/ be_x", ok: true},
		{name: "a value changed, the file without a last newline", old: "a 1\nb 2", new: "a 1\nb 3", want: "set map /m b 3", ok: true},
		{name: "a value changed with CRLF lines", old: "a 1\r\nb 2\r\n", new: "a 1\r\nb 3\r\n", want: "set map /m b 3", ok: true},
		{name: "a value changed beside an entry with no value (which a swap could not send)", old: "a\nb 1\n", new: "a\nb 2\n", want: "set map /m b 2", ok: true},
		{name: "a comment changed: the same entries", old: m, new: strings.Replace(m, "# routes", "# the routes", 1), same: true, ok: true},
		{name: "spacing changed: the same entries", old: m, new: strings.Replace(m, "b.example/ be_b", "  b.example/ \t be_b  ", 1), same: true, ok: true},
		{name: "two entries added", old: m, new: m + "d.example/ be_d\ne.example/ be_e\n", want: "add map /m d.example/ be_d\nadd map /m e.example/ be_e", ok: true},
		{name: "one added, one deleted, apart", old: m, new: strings.Replace(strings.Replace(m, "a.example/ be_a\n", "", 1), "c.example/ be_c\n", "c.example/ be_c\nd.example/ be_d\n", 1),
			want: "add map /m d.example/ be_d\ndel map /m a.example/", ok: true},
		{name: "a key renamed: the new one added, then the old one deleted", old: m, new: strings.Replace(m, "b.example/", "bx.example/", 1),
			want: "add map /m bx.example/ be_b\ndel map /m b.example/", ok: true},
		{name: "an entry moved in the file: no edit, but not the same for a lookup in file order", old: m, new: "# routes\nb.example/ be_b\nc.example/ be_c\na.example/ be_a\n", ok: true},
		{name: "adds longest key first, deletes shortest first, sets between",
			old: "/ root\n/a a\n/a/b ab\n/c c\n", new: "/ root2\n/x x\n/x/y xy\n/x/y/z xyz\n/c c\n",
			want: "add map /m /x/y/z xyz\nadd map /m /x/y xy\nadd map /m /x x\nset map /m / root2\ndel map /m /a\ndel map /m /a/b", ok: true},
		{name: "as many edits as allowed", old: "", new: strings.Join(strings.SplitAfter(many.String(), "\n")[:maxMapEdits], ""), ok: true,
			want: strings.TrimSpace(strings.ReplaceAll("\n"+strings.Join(strings.SplitAfter(many.String(), "\n")[:maxMapEdits], ""), "\nh", "\nadd map /m h"))},
		{name: "more edits than allowed: a swap", old: "", new: many.String()},
		{name: "an entry added whose key is there already (two entries of one key)", old: m, new: m + "a.example/ be_z\n"},
		{name: "one of a key's two entries deleted", old: m + "a.example/ be_z\n", new: m},
		{name: "a value of a repeated key changed", old: m + "a.example/ be_z\n", new: m + "a.example/ be_y\n"},
		{name: "a key twice among the changed lines", old: m, new: m + "d.example/ be_d\nd.example/ be_e\n"},
		{name: "a value with a space (several words on the command line)", old: m, new: m + "d.example/ be d\n"},
		{name: "a value the command line would read otherwise", old: m, new: m + "d.example/ be;d\n"},
		{name: "a value ending with << (a payload)", old: m, new: m + "d.example/ be<<\n"},
		{name: "a line with no value", old: m, new: m + "d.example/\n"},
		// The tail both files end with must start a line in both: "y z" is not an entry of new.
		{name: "a common end that is not whole lines", old: "y z\n", new: "x yy z\n"},
		{name: "a longer key ending like another", old: "k v\n", new: "kk v\n", want: "add map /m kk v\ndel map /m k", ok: true},
	}
	for _, c := range cases {
		for _, maxDiff := range []int{maxLineDiff, 0} { // through the line diff, and every entry compared
			t.Run(fmt.Sprintf("%s/diff%d", c.name, maxDiff), func(t *testing.T) {
				testEntryEdits(t, c.old, c.new, c.want, c.same, c.ok, maxDiff)
			})
		}
	}
}

func testEntryEdits(t *testing.T, old, new, want string, wantSame, wantOK bool, maxDiff int) {
	edits, same, ok := entryEditsWithin([]byte(old), []byte(new), defaultMapPayload, maxDiff)
	var lines []string
	for _, e := range edits {
		lines = append(lines, e.line("/m"))
	}
	if got := strings.Join(lines, "\n"); ok != wantOK || same != wantSame || got != want {
		t.Errorf("entryEdits = %q, same %v, ok %v; want %q, same %v, ok %v", got, same, ok, want, wantSame, wantOK)
	}
}

// TestEntryEditsMatchTheEntries: for random map files and random changes of them, the edits
// entryEdits finds do to the entries of the old file, as HAProxy does them one after the other
// (add map appends, set map and del map change every entry of the key), what loading the new
// file gives: the same value for every key looked up, exactly or by longest prefix. Between
// two edits, every lookup finds what the old file or the new file gives it, never another
// value. A change of one entry with a key of its own, the lines around it untouched, is
// always found; so are most changes of a few.
func TestEntryEditsMatchTheEntries(t *testing.T) {
	for _, maxDiff := range []int{maxLineDiff, 3, 0} { // the line diff, and every entry compared past it
		t.Run(fmt.Sprintf("diff%d", maxDiff), func(t *testing.T) { entryEditsMatchTheEntries(t, maxDiff) })
	}
}

func entryEditsMatchTheEntries(t *testing.T, maxDiff int) {
	rng := rand.New(rand.NewPCG(25, 1))
	keys := []string{"a", "b", "c", "d", "a/", "a/b", "a/b/c", "bb", "#x", "b/"}
	probes := append(slices.Clone(keys), "", "a/b/c/d", "a/x", "bbb", "b/c", "x", "ab")
	line := func() string {
		switch rng.IntN(10) {
		case 0:
			return "# comment"
		case 1:
			return ""
		case 2:
			return "  " + keys[rng.IntN(len(keys))] + " \t v" + fmt.Sprint(rng.IntN(3)) + " "
		}
		return keys[rng.IntN(len(keys))] + " v" + fmt.Sprint(rng.IntN(3))
	}
	found, several := 0, 0
	for i := 0; i < 20000; i++ {
		var lines []string
		for range rng.IntN(8) {
			lines = append(lines, line())
		}
		next := slices.Clone(lines)
		single, last := false, false
		switch rng.IntN(4) {
		case 0: // one entry of a new key inserted
			k := fmt.Sprintf("new%d", rng.IntN(3))
			at := rng.IntN(len(next) + 1)
			next = slices.Insert(next, at, k+" v9")
			single = !slices.ContainsFunc(lines, func(l string) bool { return strings.Fields(l + " x")[0] == k })
			last = at == len(lines) && at > 0
		case 1: // a line deleted
			if len(next) > 0 {
				i := rng.IntN(len(next))
				next = slices.Delete(next, i, i+1)
			}
		default: // random lines changed
			for range rng.IntN(4) + 1 {
				if len(next) > 0 {
					next[rng.IntN(len(next))] = line()
				}
			}
		}
		old, new := strings.Join(lines, "\n"), strings.Join(next, "\n")
		if rng.IntN(2) == 0 {
			old, new = old+"\n", new+"\n"
		} else if last {
			single = false // the last line gains a newline: it may change too
		}
		edits, same, ok := entryEditsWithin([]byte(old), []byte(new), defaultMapPayload, maxDiff)
		keyedSameAsRead(t, old, new, maxDiff, edits, same, ok, probes)
		oldE, oldErr := entriesOf(old)
		newE, newErr := entriesOf(new)
		if single && oldErr == nil && newErr == nil && (!ok || len(edits) == 0) {
			t.Fatalf("%q -> %q: a new key's entry not found (ok %v, %d edits)", old, new, ok, len(edits))
		}
		if !ok {
			continue
		}
		if oldErr != nil || newErr != nil {
			t.Fatalf("%q -> %q: edits of files that do not read (%v, %v)", old, new, oldErr, newErr)
		}
		if same && !slices.Equal(oldE, newE) {
			t.Fatalf("%q -> %q: the same, but the entries are %q and %q", old, new, oldE, newE)
		}
		if len(edits) == 0 {
			if !maps.Equal(lookups(oldE, probes), lookups(newE, probes)) {
				t.Fatalf("%q -> %q: no edits, but the entries are %q and %q", old, new, oldE, newE)
			}
			continue
		}
		found++
		if len(edits) > 1 {
			several++
		}
		before, after := lookups(oldE, probes), lookups(newE, probes)
		at := oldE
		for j, e := range edits {
			at = applyEdit(at, e)
			for k, v := range lookups(at, probes) {
				if v != before[k] && v != after[k] {
					t.Fatalf("%q -> %q: after %d of %v, %s finds %q: neither the old file's %q nor the new one's %q", old, new, j+1, edits, k, v, before[k], after[k])
				}
			}
		}
		if got := lookups(at, probes); !maps.Equal(got, after) {
			t.Fatalf("%q -> %q: %v gives %v, the new file %v", old, new, edits, got, after)
		}
	}
	if found < 4000 || several < 1000 {
		t.Errorf("only %d changes found as edits, %d of them several", found, several)
	}
}

// entriesOf is the entries of a map file as HAProxy reads it.
func entriesOf(content string) ([][2]string, error) {
	var out [][2]string
	_, err := eachMapEntry([]byte(content), defaultMapPayload, func(k, v string, _ int) { out = append(out, [2]string{k, v}) })
	return out, err
}

// applyEdit does e to entries as HAProxy does.
func applyEdit(entries [][2]string, e mapEdit) [][2]string {
	out := slices.Clone(entries)
	switch e.op {
	case "add":
		return append(out, [2]string{e.key, e.value})
	case "del":
		return slices.DeleteFunc(out, func(x [2]string) bool { return x[0] == e.key })
	}
	for i := range out {
		if out[i][0] == e.key {
			out[i][1] = e.value
		}
	}
	return out
}

// lookups is what looking up each probe finds in a tree: "=" and the value of its key's first
// entry (exact: map), "^" and the value of the first entry of the longest key it begins with
// (longest prefix: map_beg); "" for none.
func lookups(entries [][2]string, probes []string) map[string]string {
	out := map[string]string{}
	for _, p := range probes {
		exact, pfx, best := "", "", -1
		for _, e := range entries {
			if e[0] == p && exact == "" {
				exact = "=" + e[1]
			}
			if strings.HasPrefix(p, e[0]) && len(e[0]) > best {
				pfx, best = "^"+e[1], len(e[0])
			}
		}
		out["="+p], out["^"+p] = exact, pfx
	}
	return out
}

// TestLineDiff: for random line lists, what lineDiff deletes and inserts is a shortest edit
// script (as long as the lists' longest common subsequence says), and the lines it keeps of
// each are the same; none is found past the bound.
func TestLineDiff(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	gen := func() [][]byte {
		var out [][]byte
		for range rng.IntN(12) {
			if rng.IntN(8) == 0 {
				out = append(out, []byte{}) // a blank line
				continue
			}
			out = append(out, []byte{byte('a' + rng.IntN(4))})
		}
		return out
	}
	for i := 0; i < 20000; i++ {
		a, b := gen(), gen()
		if rng.IntN(2) == 0 { // mostly alike, as map files are
			b = slices.Clone(a)
			for range rng.IntN(3) {
				at := rng.IntN(len(b) + 1)
				b = slices.Insert(b, at, []byte{'z'})
			}
		}
		want := len(a) + len(b) - 2*lcs(a, b)
		max := rng.IntN(12)
		text := func(lines [][]byte) []byte {
			t := bytes.Join(lines, []byte{'\n'})
			// The last line's newline, most often (a blank last line has one).
			if len(lines) > 0 && (rng.IntN(4) > 0 || len(lines[len(lines)-1]) == 0) {
				t = append(t, '\n')
			}
			return t
		}
		dl, il, found := lineDiff(text(a), text(b), max)
		var del, ins []int
		for _, l := range dl {
			if del = append(del, l.n); !bytes.Equal(l.text, a[l.n]) {
				t.Fatalf("%q -> %q: line %d deleted as %q", a, b, l.n, l.text)
			}
		}
		for _, l := range il {
			if ins = append(ins, l.n); !bytes.Equal(l.text, b[l.n]) {
				t.Fatalf("%q -> %q: line %d inserted as %q", a, b, l.n, l.text)
			}
		}
		if found != (want <= max) {
			t.Fatalf("%q -> %q within %d: found %v, the shortest script is %d", a, b, max, found, want)
		}
		if !found {
			continue
		}
		if len(del)+len(ins) != want {
			t.Fatalf("%q -> %q: %d deleted %v, %d inserted %v; the shortest script is %d", a, b, len(del), del, len(ins), ins, want)
		}
		if ka, kb := keep(a, del), keep(b, ins); !slices.EqualFunc(ka, kb, bytes.Equal) {
			t.Fatalf("%q -> %q: kept %q of the one, %q of the other", a, b, ka, kb)
		}
	}
}

// lcs is the length of the longest common subsequence of a and b.
func lcs(a, b [][]byte) int {
	l := make([][]int, len(a)+1)
	for i := range l {
		l[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if bytes.Equal(a[i], b[j]) {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	return l[0][0]
}

// keep is lines without those at idx (ascending).
func keep(lines [][]byte, idx []int) [][]byte {
	var out [][]byte
	for i, l := range lines {
		if !slices.Contains(idx, i) {
			out = append(out, l)
		}
	}
	return out
}

func TestTreeOnly(t *testing.T) {
	const path = "/maps/routes.map"
	cases := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"map and map_beg", []string{"http-request set-var(txn.b) var(txn.k),map(/maps/routes.map)",
			"http-request set-var(txn.b) var(txn.k),map_beg(/maps/routes.map,none) if !{ var(txn.b) -m found }"}, true},
		{"map_str and output types", []string{"use_backend %[req.hdr(host),lower,map_str(/maps/routes.map)]", "http-request set-var(txn.n) path,map_beg_int(/maps/routes.map,0)"}, true},
		{"map_reg too (file order)", []string{"http-request set-var(txn.b) var(txn.k),map(/maps/routes.map)", "http-request set-var(txn.r) path,map_reg(/maps/routes.map)"}, false},
		{"map_end", []string{"use_backend %[path,map_end(/maps/routes.map)]"}, false},
		{"map_int (an integer match, a list)", []string{"use_backend %[dst_port,map_int(/maps/routes.map)]"}, false},
		{"an ACL reads the file", []string{"acl known path -m beg -f /maps/routes.map", "use_backend %[path,map_beg(/maps/routes.map)]"}, false},
		{"another file whose name begins as this one's", []string{"use_backend %[path,map(/maps/routes.map)]", "use_backend %[path,map_reg(/maps/routes.map.old)]"}, false},
		{"not used", []string{"use_backend %[path,map(/maps/other.map)]"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &cfgparse.Config{Sections: []*cfgparse.Section{{Kind: "frontend", Name: "fe", Lines: c.lines}}}
			if got := treeOnly(cfg, path); got != c.want {
				t.Errorf("treeOnly = %v, want %v", got, c.want)
			}
		})
	}
}

// TestPlanMapEntryEdits: a map every lookup of which is a tree's (map, map_beg) goes live as
// the entries that changed, a command each; a change of more than maxMapEdits, or of a map
// also read through a list (map_reg), is a swap.
func TestPlanMapEntryEdits(t *testing.T) {
	ctx := context.Background()
	cfgs := treeMapCfg("", "a 10.0.0.1:80 check")
	tree, list := cfgs[0], cfgs[1]
	maps := map[string]string{"hosts.map": "a.example be_a\nb.example be_b\n", "paths.map": "/api be_api\n"}
	hosts := mapsDir + "/hosts.map"
	var b strings.Builder
	for i := range maxMapEdits + 1 {
		fmt.Fprintf(&b, "h%02d.example be_h\n", i)
	}
	manyHosts := b.String()
	with := func(content string) map[string]string {
		return map[string]string{"hosts.map": content, "paths.map": maps["paths.map"]}
	}
	cases := []struct {
		name   string
		config []byte
		next   map[string]string
		sent   []string // after show map, show acl
	}{
		{"an entry added", tree, with("a.example be_a\nb.example be_b\nc.example be_c\n"), []string{"add map " + hosts + " c.example be_c"}},
		{"an entry deleted", tree, with("b.example be_b\n"), []string{"del map " + hosts + " a.example"}},
		{"a value changed", tree, with("a.example be_x\nb.example be_b\n"), []string{"set map " + hosts + " a.example be_x"}},
		{"an entry added to each map: both sent with the commits", tree, map[string]string{"hosts.map": maps["hosts.map"] + "c.example be_c\n", "paths.map": "/api be_api\n/web be_web\n"},
			[]string{"add map " + hosts + " c.example be_c", "add map " + mapsDir + "/paths.map /web be_web"}},
		{"two entries changed: two commands", tree, with("a.example be_x\nb.example be_y\n"),
			[]string{"set map " + hosts + " a.example be_x", "set map " + hosts + " b.example be_y"}},
		{"a key renamed: the new one added, then the old one deleted", tree, with("a.example be_a\nbb.example be_b\n"),
			[]string{"add map " + hosts + " bb.example be_b", "del map " + hosts + " b.example"}},
		{"more entries changed than commands allowed: a swap", tree, with(manyHosts),
			[]string{"prepare map " + hosts, "add map @7 " + hosts + " <<\n" + manyHosts, "commit map @7 " + hosts}},
		{"a map read through map_reg too: a swap", list, with("a.example be_a\nb.example be_b\nc.example be_c\n"),
			[]string{"prepare map " + hosts, "add map @7 " + hosts + " <<\na.example be_a\nb.example be_b\nc.example be_c\n", "commit map @7 " + hosts}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, fc := mapsLoaded(t, c.config, maps)
			p := u.Plan(c.config, nil, files(c.next))
			if p.Reload() != "" {
				t.Fatalf("reload: %s", p.Reload())
			}
			if err := u.Apply(ctx, p); err != nil {
				t.Fatal(err)
			}
			if got, want := fc.commands(), append([]string{"show map", "show acl"}, c.sent...); !reflect.DeepEqual(got, want) {
				t.Fatalf("sent %q\nwant %q", got, want)
			}
			if p := u.Plan(c.config, nil, files(c.next)); p.Reload() != "" || p.Changes() != 0 {
				t.Fatalf("after Apply: reason %q, %d changes", p.Reload(), p.Changes())
			}
		})
	}
}

// TestPlanMapEntriesMoved: entries moved in a map file change nothing a tree lookup finds, so
// nothing is sent; a map also read in file order (map_reg) is swapped for it.
func TestPlanMapEntriesMoved(t *testing.T) {
	cfgs := treeMapCfg("", "a 10.0.0.1:80 check")
	tree, list := cfgs[0], cfgs[1]
	live := map[string]string{"hosts.map": "a.example be_a\nb.example be_b\n", "paths.map": "/api be_api\n"}
	moved := files(map[string]string{"hosts.map": "b.example be_b\na.example be_a\n", "paths.map": "/api be_api\n"})
	u, _ := mapsLoaded(t, tree, live)
	if p := u.Plan(tree, nil, moved); p.Reload() != "" || p.Changes() != 0 {
		t.Errorf("tree lookups only: reason %q, %d changes; want none", p.Reload(), p.Changes())
	}
	u, _ = mapsLoaded(t, list, live)
	p := u.Plan(list, nil, moved)
	if cmds := strings.Join(p.Commands(), "\n"); p.Reload() != "" || !strings.Contains(cmds, "prepare map "+mapsDir+"/hosts.map") {
		t.Errorf("read by map_reg too: reason %q, commands %q; want a swap", p.Reload(), cmds)
	}
}

// BenchmarkEntryEdits: a route's new path at 10,000 routes, two entries added far apart in
// routes.map (its prefix entry among the longest, its exact entry among the keys), found by
// the line diff and by comparing every entry between them.
func BenchmarkEntryEdits(b *testing.B) {
	var prefix, exact []string
	for i := range 10000 {
		prefix = append(prefix, fmt.Sprintf("host-%05d.example.com/ be_%05d", i, i))
		exact = append(exact, fmt.Sprintf("host-%05d.example.com? be_%05d", i, i))
	}
	old := []byte(strings.Join(append(slices.Clone(prefix), exact...), "\n") + "\n")
	prefix = slices.Insert(prefix, 10, "host-05000.example.com/v1/ be_05001")
	exact = slices.Insert(exact, 5001, "host-05000.example.com/v1? be_05001")
	new := []byte(strings.Join(append(prefix, exact...), "\n") + "\n")
	for _, maxDiff := range []int{maxLineDiff, 0} {
		b.Run(fmt.Sprintf("diff%d", maxDiff), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if edits, _, ok := entryEditsWithin(old, new, defaultMapPayload, maxDiff); !ok || len(edits) != 2 {
					b.Fatalf("%v, %v", edits, ok)
				}
			}
		})
	}
}

// TestCommonEnds: the ends changedLines cuts off, compared a block at a time, are those found
// a byte at a time, whatever the block boundaries.
func TestCommonEnds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	prefix := func(a, b []byte) int {
		p := 0
		for p < len(a) && p < len(b) && a[p] == b[p] {
			p++
		}
		return p
	}
	suffix := func(a, b []byte) int {
		s := 0
		for s < len(a) && s < len(b) && a[len(a)-1-s] == b[len(b)-1-s] {
			s++
		}
		return s
	}
	for range 2000 {
		a := make([]byte, r.IntN(4*compareChunk))
		for i := range a {
			a[i] = byte('a' + r.IntN(2))
		}
		b := slices.Clone(a)
		switch r.IntN(4) {
		case 0:
			if len(b) > 0 {
				b[r.IntN(len(b))] ^= 1
			}
		case 1:
			i := r.IntN(len(b) + 1)
			b = slices.Insert(b, i, 'x')
		case 2:
			if len(b) > 0 {
				i := r.IntN(len(b))
				b = slices.Delete(b, i, i+1)
			}
		}
		if got, want := commonPrefix(a, b), prefix(a, b); got != want {
			t.Fatalf("commonPrefix(%q, %q) = %d, want %d", a, b, got, want)
		}
		if got, want := commonSuffix(a, b), suffix(a, b); got != want {
			t.Fatalf("commonSuffix(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

// keyedSameAsRead fails unless entryEditsKeyed, the keys of old counted by an index, finds
// what entryEditsWithin found reading the files, and the index it derives for new counts the
// probes as countKey does in new.
func keyedSameAsRead(t *testing.T, old, new string, maxDiff int, edits []mapEdit, same, ok bool, probes []string) {
	t.Helper()
	kEdits, kSame, kOK, newKeys := entryEditsKeyed([]byte(old), []byte(new), defaultMapPayload, maxDiff,
		func() *keyIndex { return newKeyIndex([]byte(old)) })
	if !slices.Equal(kEdits, edits) || kSame != same || kOK != ok {
		t.Fatalf("%q -> %q: with an index %v %v %v, reading the files %v %v %v", old, new, kEdits, kSame, kOK, edits, same, ok)
	}
	if newKeys == nil {
		return
	}
	for _, k := range probes {
		if k != "" && newKeys.count(k) != countKey([]byte(new), k) && countKey([]byte(new), k) < 2 {
			t.Fatalf("%q -> %q: the index counts %d lines of %q, countKey %d", old, new, newKeys.count(k), k, countKey([]byte(new), k))
		}
	}
}

// TestKeyIndexFollowsChanges: an index derived change after change from the first file's
// (keyIndex.with, and a new base past maxKeyDelta) counts each key as countKey does in the
// file it is for (up to 2, as countKey counts), and as an index made from that file.
func TestKeyIndexFollowsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 25))
	word := func() string { return fmt.Sprintf("k%d", rng.IntN(400)) } // more than maxKeyDelta
	line := func() string {
		return []string{word() + " v", "  " + word() + "\tv", word() + "\r", "# " + word(), "", "\t" + word() + " x y"}[rng.IntN(6)]
	}
	var lines []string
	for range 400 {
		lines = append(lines, line())
	}
	text := func() []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	x := newKeyIndex(text())
	rebased := 0
	for range 3000 {
		var del, ins [][]byte
		for range rng.IntN(9) {
			if i := rng.IntN(len(lines) + 1); i < len(lines) && rng.IntN(2) == 0 {
				del = append(del, []byte(lines[i]))
				lines = slices.Delete(lines, i, i+1)
			} else {
				l := line()
				ins = append(ins, []byte(l))
				lines = slices.Insert(lines, i, l)
			}
		}
		next := x.with(del, ins, text())
		if next.delta == nil {
			rebased++
		}
		x = next
		fresh := newKeyIndex(text())
		for range 40 {
			k := fmt.Sprintf("k%d", rng.IntN(402))
			if want := countKey(text(), k); min(x.count(k), 2) != want || x.count(k) != fresh.count(k) {
				t.Fatalf("%q: %d lines (a fresh index: %d), countKey %d", k, x.count(k), fresh.count(k), want)
			}
		}
	}
	if rebased == 0 {
		t.Error("no new base made in 3,000 changes")
	}
}

// TestPlanMapsAfterRandomEdits: over random edits of two map files, the plan made against what
// HAProxy runs with the index of its map files' keys kept from the plan before (keyIndex) is
// the plan made reading the files, what HAProxy runs following each plan as after a reload or
// an update; and each index kept counts the keys of its file as countKey does.
func TestPlanMapsAfterRandomEdits(t *testing.T) {
	d := dirs{ssl: ssl, maps: mapsDir}
	config := treeMapCfg("", "a 10.0.0.1:80 check")[0]
	r := rand.New(rand.NewPCG(25, 10))
	keys := []string{"a.example/", "b.example/", "c.example/", "d.example/", "a.example/x", "b.example/y"}
	files := map[string][]string{"hosts.map": {"# hosts"}, "paths.map": {"# paths"}}
	for i := range 40 {
		files["hosts.map"] = append(files["hosts.map"], fmt.Sprintf("h%02d.example/ be_%d", i, i))
		files["paths.map"] = append(files["paths.map"], fmt.Sprintf("/p%02d be_%d", i, i))
	}
	rendered := func() map[string][]byte {
		out := map[string][]byte{}
		for name, lines := range files {
			out[name] = []byte(strings.Join(lines, "\n") + "\n")
		}
		return out
	}
	live := plan(nil, config, nil, rendered(), d).Loaded()
	edits, swaps, indexed := 0, 0, 0
	for range 600 {
		for name, lines := range files {
			if r.IntN(2) == 0 {
				continue
			}
			for range 1 + r.IntN(3) {
				at := 1 + r.IntN(len(lines))
				switch k := keys[r.IntN(len(keys))]; r.IntN(4) {
				case 0:
					lines = slices.Insert(lines, at, fmt.Sprintf("%s be_%d", k, r.IntN(3)))
				case 1:
					if at < len(lines) {
						lines = slices.Delete(lines, at, at+1)
					}
				case 2:
					if at < len(lines) {
						lines[at] = fmt.Sprintf("%s be_%d", k, r.IntN(3))
					}
				default:
					lines = slices.Insert(lines, at, "# "+k)
				}
			}
			files[name] = lines
		}
		maps := rendered()
		p := plan(live, config, nil, maps, d)
		read := live.clone()
		read.keys = nil
		want := plan(read, config, nil, maps, d)
		if p.Reload() != want.Reload() || !slices.Equal(p.Commands(), want.Commands()) {
			t.Fatalf("plan %q %q, reading the files %q %q", p.Reload(), p.Commands(), want.Reload(), want.Commands())
		}
		for _, c := range p.Commands() {
			if strings.HasPrefix(c, "prepare map") {
				swaps++
			} else if strings.Contains(c, " map ") {
				edits++
			}
		}
		if len(live.keys) > 0 {
			indexed++
		}
		for name, x := range live.keys {
			if bytes.Equal(live.maps[name], maps[name]) && p.full.keys[name] != x {
				t.Fatalf("%s did not change and its index was not kept", name)
			}
		}
		if r.IntN(5) == 0 {
			live = p.Loaded()
		} else {
			live = p.target
		}
		for name, x := range live.keys {
			for _, k := range keys {
				if got, want := min(x.count(k), 2), countKey(live.maps[name], k); got != want {
					t.Fatalf("%s: the index kept counts %d lines of %q, countKey %d", name, got, k, want)
				}
			}
		}
	}
	if edits < 100 || swaps < 50 || indexed < 300 {
		t.Errorf("%d map edits, %d swaps, %d plans with an index: the test compares little", edits, swaps, indexed)
	}
}
