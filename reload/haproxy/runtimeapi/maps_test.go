package runtimeapi

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const mapsDir = "/etc/haproxy/maps"

// showList is the answer of show map or show acl listing files.
func showList(files ...string) string {
	var b strings.Builder
	b.WriteString("# id (file) description\n")
	for i, f := range files {
		fmt.Fprintf(&b, "%d (%s) pattern loaded from file '%s' used by map at file '/etc/haproxy/haproxy.cfg' line 12. curr_ver=0 next_ver=0 entry_cnt=3\n", i, f, f)
	}
	return b.String() + "\n"
}

func TestMapPayloads(t *testing.T) {
	cases := []struct {
		name    string
		content string
		limit   int
		want    []string // payloads
		err     string   // part of the error
	}{
		{name: "entries in file order, duplicates kept",
			content: "b.example be_b\na.example be_a\nb.example be_x\n",
			want:    []string{"b.example be_b\na.example be_a\nb.example be_x"}},
		{name: "as HAProxy reads a map file: comments, blank lines, spaces and tabs around",
			content: "# hosts\n\n   \n  a.example \t be_a  \t\nb.example\tbe_b\n#c.example be_c\n",
			want:    []string{"a.example be_a\nb.example be_b"}},
		{name: "a value keeps its inner spaces",
			content: "/api   http://x y  z \n",
			want:    []string{"/api http://x y  z"}},
		{name: "a '#' after leading spaces is a key, not a comment",
			content: "  #x y\n",
			want:    []string{"#x y"}},
		{name: "characters the CLI would interpret elsewhere are plain in a payload",
			content: "semi;colon be;x#y\\z \"q\" 's' $HOME\n",
			want:    []string{"semi;colon be;x#y\\z \"q\" 's' $HOME"}},
		{name: "CRLF lines", content: "a.example be_a\r\nb.example be_b\r\n",
			want: []string{"a.example be_a\nb.example be_b"}},
		{name: "no final newline", content: "a.example be_a", want: []string{"a.example be_a"}},
		{name: "empty: no entries", content: "# none\n", want: nil},
		{name: "payloads within the limit", limit: 32,
			content: "a.example be_a\nb.example be_b\nc.example be_c\n",
			want:    []string{"a.example be_a\nb.example be_b", "c.example be_c"}},
		{name: "a key with no value", content: "a.example be_a\nb.example\n", err: `line 2: key "b.example" has no value`},
		{name: "a key with no value but spaces", content: "b.example  \t \n", err: "has no value"},
		{name: "a tab inside a value", content: "a.example be\ta\n", err: "line 1: the value of key \"a.example\" has a control character"},
		{name: "a CR inside a line", content: "a.example be_a\rjunk\n", err: "control character"},
		{name: "a NUL", content: "a.exa\x00mple be_a\n", err: "line 1: the key has a control character"},
		{name: "an escape sequence", content: "a.example \x1b[2J\n", err: "control character"},
		{name: "a C1 control", content: "a.example be\u0085a\n", err: "control character"},
		{name: "not UTF-8", content: "a.example be\xffa\n", err: "not valid UTF-8"},
		{name: "a line longer than the limit", limit: 16, content: "a.example be_a\nlong.example.com be_long\n", err: "line 2 is longer than 15 bytes"},
		{name: "a long comment too (HAProxy would read its rest as an entry)", limit: 16, content: "# a very long comment line\n", err: "line 1 is longer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			limit := c.limit
			if limit == 0 {
				limit = defaultMapPayload
			}
			got, n, err := mapPayloads([]byte(c.content), limit)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("payloads %q\nwant %q", got, c.want)
			}
			entries := 0
			for _, p := range got {
				entries += strings.Count(p, "\n") + 1
				if len(p) > limit {
					t.Errorf("payload of %d bytes over the limit %d", len(p), limit)
				}
				if err := checkPayload(p); err != nil {
					t.Errorf("payload fails the check: %v", err)
				}
			}
			if n != entries {
				t.Errorf("%d entries counted, %d in the payloads", n, entries)
			}
		})
	}
}

// mapsLoaded returns an Updater that knows (tracked) HAProxy runs config with the map files maps.
func mapsLoaded(t *testing.T, config []byte, maps map[string]string) (*tracked, *fakeClient) {
	t.Helper()
	fc := &fakeClient{}
	u := track(New(Options{SSLDir: ssl, MapsDir: mapsDir, Client: fc}))
	p := u.Plan(config, nil, files(maps))
	if p.Reload() == "" {
		t.Fatal("the first plan must ask for a reload")
	}
	u.Reloaded(p)
	return u, fc
}

func files(m map[string]string) map[string][]byte {
	if m == nil {
		return nil
	}
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// mapCfg is cfg with a frontend routing by host through hosts.map and by path through
// paths.map, and reading both through map_reg too (a list in file order: their changes are
// swaps).
func mapCfg(global string, servers ...string) []byte {
	return treeMapCfg(global, servers...)[1]
}

// treeMapCfg is mapCfg without map_reg ([0]: every lookup a tree's, whose one entry changed is
// sent alone) and mapCfg ([1]).
func treeMapCfg(global string, servers ...string) [2][]byte {
	c := string(cfg(nil, servers...))
	c = strings.Replace(c, "    default_backend be_web\n",
		"    use_backend %[req.hdr(host),lower,map("+mapsDir+"/hosts.map)]\n    use_backend %[path,map_beg("+mapsDir+"/paths.map)]\n    default_backend be_web\n", 1)
	tree := strings.Replace(c, "    maxconn 100\n", "    maxconn 100\n"+global, 1)
	list := strings.Replace(tree, "    default_backend be_web\n",
		"    http-request set-header X-Reg %[req.hdr(host),map_reg("+mapsDir+"/hosts.map,none)]/%[path,map_reg("+mapsDir+"/paths.map,none)]\n    default_backend be_web\n", 1)
	return [2][]byte{[]byte(tree), []byte(list)}
}

func TestPlanMaps(t *testing.T) {
	base := mapCfg("", "a 10.0.0.1:80 check")
	maps := map[string]string{"hosts.map": "a.example be_a\nb.example be_b\n", "paths.map": "/api be_api\n"}
	with := func(name, content string) map[string]string {
		m := map[string]string{}
		for k, v := range maps {
			m[k] = v
		}
		if content == "" {
			delete(m, name)
		} else {
			m[name] = content
		}
		return m
	}
	swap := func(name string, adds int) []string {
		out := []string{"prepare map " + mapsDir + "/" + name}
		for i := 0; i < adds; i++ {
			out = append(out, "add map @<ver> "+mapsDir+"/"+name+" <<")
		}
		return append(out, "commit map @<ver> "+mapsDir+"/"+name)
	}
	many := "a.example be_a\n" + strings.Repeat("host-with-a-long-name.example be_long\n", 500) // 19 kB
	cases := []struct {
		name    string
		base    []byte            // what HAProxy runs; default base
		running map[string]string // the maps HAProxy runs; default maps
		config  []byte            // the rendering; default: as base
		maps    map[string]string
		mapsDir string // default mapsDir; "-" for none
		reload  string
		cmds    []string
		summary string
	}{
		{name: "unchanged", maps: maps},
		{name: "an entry changed", maps: with("hosts.map", "a.example be_b\nb.example be_b\n"),
			cmds: swap("hosts.map", 1), summary: "1 map_updated"},
		{name: "an entry added, one removed: both maps", maps: map[string]string{"hosts.map": "a.example be_a\nc.example be_b\n", "paths.map": "/api be_api\n/web be_web\n"},
			cmds: append(swap("hosts.map", 1), swap("paths.map", 1)...), summary: "2 map_updated"},
		{name: "every entry removed: a swap to an empty map", maps: with("hosts.map", "# none\n"),
			cmds: swap("hosts.map", 0)},
		{name: "from an empty map: a version of its own first, whose deletion clears HAProxy's lookup cache",
			running: with("paths.map", "# none\n  \r\n"), maps: with("paths.map", "/api be_api\n/web be_web\n"),
			cmds: append([]string{"prepare map " + mapsDir + "/paths.map", "add map @<ver>-1 " + mapsDir + "/paths.map <<"}, swap("paths.map", 1)...)},
		{name: "comments, blank lines and spacing changed: the same entries, nothing to send", maps: with("hosts.map", "# v2\n\na.example   be_a\n  b.example\tbe_b \n")},
		{name: "a large map goes in several payloads", maps: with("hosts.map", many),
			cmds: swap("hosts.map", 2)},
		{name: "a smaller tune.bufsize makes smaller payloads", base: mapCfg("    tune.bufsize 2048\n", "a 10.0.0.1:80 check"),
			maps: with("hosts.map", many), cmds: swap("hosts.map", 20)},
		{name: "tune.bufsize changed: a reload; while it waits, the swap fits the buffer HAProxy runs with",
			config: mapCfg("    tune.bufsize 2048\n", "a 10.0.0.1:80 check"),
			maps:   with("hosts.map", many), reload: "global section: a \"tune.bufsize\" line was added", cmds: swap("hosts.map", 2)},
		{name: "with servers", config: mapCfg("", "a 10.0.0.1:80 check", "b 10.0.0.2:80 check"), maps: with("hosts.map", "a.example be_b\n"),
			cmds:    append([]string{"add server be_web/b 10.0.0.2:80 inter 2s fall 3 rise 2 check", "enable health be_web/b", "enable server be_web/b"}, swap("hosts.map", 1)...),
			summary: "1 server_added, 1 map_updated"},
		{name: "a map file added", maps: with("extra.map", "x y\n"), reload: `map file "extra.map" is new`},
		{name: "a map file removed", maps: with("paths.map", ""), reload: `map file "paths.map" was removed`},
		{name: "a map file renamed", maps: map[string]string{"hosts.map": maps["hosts.map"], "routes.map": maps["paths.map"]}, reload: `"paths.map" was removed`},
		{name: "a frontend change too", config: []byte(strings.Replace(string(base), "bind :80", "bind :81", 1)), maps: with("hosts.map", "a.example be_b\n"),
			reload: "frontend \"fe\": a \"bind\" line changed", cmds: swap("hosts.map", 1)},
		{name: "a key without a value", maps: with("hosts.map", "a.example be_a\nb.example\n"), reload: `map file "hosts.map": line 2: key "b.example" has no value`},
		{name: "a control character in a value", maps: with("hosts.map", "a.example be_a\x1b\n"), reload: "has a control character"},
		{name: "the map directory not known", maps: with("hosts.map", "a.example be_b\n"), mapsDir: "-", reload: "the map directory is not known"},
		{name: "a map directory that cannot be written on a command line", maps: with("hosts.map", "a.example be_b\n"), mapsDir: "/etc/ha proxy/maps", reload: "cannot be written on the runtime API"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := mapsDir
			switch c.mapsDir {
			case "-":
				dir = ""
			case "":
			default:
				dir = c.mapsDir
			}
			u := track(New(Options{SSLDir: ssl, MapsDir: dir, Client: &fakeClient{}}))
			old := base
			if c.base != nil {
				old = c.base
			}
			running := maps
			if c.running != nil {
				running = c.running
			}
			u.Reloaded(u.Plan(old, nil, files(running)))
			next := old
			if c.config != nil {
				next = c.config
			}
			p := u.Plan(next, nil, files(c.maps))
			if c.reload == "" && p.Reload() != "" || c.reload != "" && !strings.Contains(p.Reload(), c.reload) {
				t.Fatalf("reason %q, want %q", p.Reload(), c.reload)
			}
			if got := p.Commands(); !reflect.DeepEqual(got, c.cmds) && (len(got) > 0 || len(c.cmds) > 0) {
				t.Fatalf("commands %q\nwant %q", got, c.cmds)
			}
			if c.summary != "" && p.Summary() != c.summary {
				t.Errorf("summary %q, want %q", p.Summary(), c.summary)
			}
		})
	}
}

func TestMapPayloadLimit(t *testing.T) {
	for _, c := range []struct {
		global string
		want   int
	}{
		{"", defaultMapPayload},
		{"    tune.bufsize 2048\n", 1024},
		{"    tune.bufsize 4096\n", 2048},
		{"    tune.bufsize 8192\n", 6144},
		{"    tune.bufsize 65536\n", defaultMapPayload},
		{"    tune.bufsize ${BUFSIZE}\n", defaultMapPayload},
	} {
		u := track(New(Options{MapsDir: mapsDir, Client: &fakeClient{}}))
		u.Reloaded(u.Plan(mapCfg(c.global), nil, nil))
		if got := mapPayloadLimit(u.live.cfg); got != c.want {
			t.Errorf("%q: limit %d, want %d", c.global, got, c.want)
		}
	}
}

func TestPatternFiles(t *testing.T) {
	hosts := mapsDir + "/hosts.map"
	cases := []struct {
		name       string
		maps, acls []string
		used       bool
		err        string
	}{
		{name: "loaded as a map", maps: []string{hosts, mapsDir + "/paths.map"}, used: true},
		{name: "loaded as a map and as an ACL of the same file (-M): one reference", maps: []string{hosts}, acls: []string{hosts}, used: true},
		{name: "not loaded", maps: []string{mapsDir + "/paths.map"}},
		{name: "another file of the same name elsewhere", maps: []string{hosts, "/etc/haproxy/static/hosts.map"}, used: true},
		{name: "loaded as an ACL pattern file only", acls: []string{hosts}, err: "as an ACL pattern file"},
		{name: "loaded under another spelling of its path", maps: []string{hosts, mapsDir + "//hosts.map"}, err: "as \"/etc/haproxy/maps//hosts.map\" too"},
		{name: "loaded under a relative path", maps: []string{"maps/hosts.map"}, err: "too"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := parsePatternFiles(showList(c.maps...) + showList(c.acls...))
			if err != nil {
				t.Fatal(err)
			}
			used, err := f.use(hosts)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || used != c.used {
				t.Fatalf("used %v, error %v; want %v", used, err, c.used)
			}
		})
	}
	t.Run("HAProxy's own pattern references have no file", func(t *testing.T) {
		f, err := parsePatternFiles(showList(hosts) + "# id (file) description\n1 () acl 'var' file 'httpclient' line 0. curr_ver=0 next_ver=0 entry_cnt=1\n\n")
		if err != nil || len(f.acls) != 0 || !f.maps[hosts] {
			t.Fatalf("%+v, %v", f, err)
		}
	})
	for _, bad := range []string{"", "Unknown command.\n", showList(hosts), "# id (file) description\nnonsense\n"} {
		if _, err := parsePatternFiles(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestApplyMaps(t *testing.T) {
	ctx := context.Background()
	base := mapCfg("", "a 10.0.0.1:80 check")
	maps := map[string]string{"hosts.map": "a.example be_a\n", "paths.map": "/api be_api\n"}
	hosts := mapsDir + "/hosts.map"

	t.Run("prepared, filled, then committed together; then the new maps are known", func(t *testing.T) {
		u, fc := mapsLoaded(t, base, maps)
		next := map[string]string{"hosts.map": "a.example be_b\nc.example be_c\n", "paths.map": "/api be_web\n"}
		if err := u.Apply(ctx, u.Plan(base, nil, files(next))); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"show map", "show acl",
			"prepare map " + hosts,
			"add map @7 " + hosts + " <<\na.example be_b\nc.example be_c\n",
			"prepare map " + mapsDir + "/paths.map",
			"add map @7 " + mapsDir + "/paths.map <<\n/api be_web\n",
			"commit map @7 " + hosts, "commit map @7 " + mapsDir + "/paths.map",
		}
		if got := fc.commands(); !reflect.DeepEqual(got, want) {
			t.Fatalf("sent %q\nwant %q", got, want)
		}
		if p := u.Plan(base, nil, files(next)); p.Reload() != "" || p.Changes() != 0 {
			t.Fatalf("after Apply: reason %q, %d changes", p.Reload(), p.Changes())
		}
	})

	t.Run("from an empty map: the sentinel's version first", func(t *testing.T) {
		u, fc := mapsLoaded(t, base, map[string]string{"hosts.map": "\n", "paths.map": maps["paths.map"]})
		prepared := 6
		fc.answer = func(cmd string) (string, error) {
			if strings.HasPrefix(cmd, "prepare map") {
				prepared++
				return fmt.Sprintf("New version created: %d\n\n", prepared), nil
			}
			return "", nil
		}
		if err := u.Apply(ctx, u.Plan(base, nil, files(map[string]string{"hosts.map": "a.example be_a\nb.example be_b\n", "paths.map": maps["paths.map"]}))); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"show map", "show acl",
			"prepare map " + hosts, "add map @7 " + hosts + " <<\na.example be_a\n",
			"prepare map " + hosts, "add map @8 " + hosts + " <<\na.example be_a\nb.example be_b\n",
			"commit map @8 " + hosts,
		}
		if got := fc.commands(); !reflect.DeepEqual(got, want) {
			t.Fatalf("sent %q\nwant %q", got, want)
		}
	})

	t.Run("a map HAProxy did not load is only written", func(t *testing.T) {
		u, fc := mapsLoaded(t, base, maps)
		fc.answer = func(cmd string) (string, error) {
			if cmd == "show map" {
				return showList(mapsDir + "/paths.map"), nil
			}
			return "", nil
		}
		if err := u.Apply(ctx, u.Plan(base, nil, files(map[string]string{"hosts.map": "x y\n", "paths.map": maps["paths.map"]}))); err != nil {
			t.Fatal(err)
		}
		if got := fc.commands(); !reflect.DeepEqual(got, []string{"show map", "show acl"}) {
			t.Fatalf("sent %q", got)
		}
	})

	for _, c := range []struct {
		name   string
		answer func(cmd string) string
		err    string
		last   string // the last command sent
	}{
		{name: "a map used as an ACL pattern file",
			answer: func(cmd string) string {
				switch cmd {
				case "show map":
					return showList()
				case "show acl":
					return showList(hosts)
				}
				return ""
			},
			err: "ACL pattern file", last: "show acl"},
		{name: "a payload HAProxy dropped (2.6: no answer)",
			answer: func(cmd string) string {
				if strings.HasPrefix(cmd, "add map") {
					return noAnswer
				}
				return ""
			},
			err: "no answer", last: "clear map @7 " + hosts},
		{name: "a payload HAProxy refused (3.x)",
			answer: func(cmd string) string {
				if strings.HasPrefix(cmd, "add map") {
					return "The command is too big for the buffer size. Please change tune.bufsize in the configuration to use a bigger command.\n"
				}
				return ""
			},
			err: "too big", last: "clear map @7 " + hosts},
		{name: "an entry HAProxy refused",
			answer: func(cmd string) string {
				if strings.HasPrefix(cmd, "add map") {
					return "'a.example' is not a valid IPv4 or IPv6 address.\n"
				}
				return ""
			},
			err: "not a valid", last: "clear map @7 " + hosts},
		{name: "an unknown map",
			answer: func(cmd string) string {
				if strings.HasPrefix(cmd, "prepare map") {
					return "Unknown map identifier. Please use #<id> or <file>.\n"
				}
				return ""
			},
			err: "Unknown map", last: "prepare map " + hosts},
		{name: "a refused commit: nothing cleared (the commit may have been made)",
			answer: func(cmd string) string {
				if strings.HasPrefix(cmd, "commit map") {
					return "Version number out of range.\n"
				}
				return ""
			},
			err: "out of range", last: "commit map @7 " + hosts},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, fc := mapsLoaded(t, base, maps)
			fc.answer = func(cmd string) (string, error) { return c.answer(cmd), nil }
			err := u.Apply(ctx, u.Plan(base, nil, files(map[string]string{"hosts.map": "a.example be_b\n", "paths.map": maps["paths.map"]})))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			got := fc.commands()
			if got[len(got)-1] != c.last {
				t.Fatalf("last command %q, want %q (sent %q)", got[len(got)-1], c.last, got)
			}
			if p := u.Plan(base, nil, files(maps)); !strings.Contains(p.Reload(), "not known") {
				t.Fatalf("after a failure the next plan must reload, reason %q", p.Reload())
			}
		})
	}
}

// samePayloads says what comparing the payloads mapPayloads makes says, for maps that differ in
// an entry, in order, in the split between payloads, or only in comments and spacing.
func TestSamePayloadsAsMapPayloads(t *testing.T) {
	contents := []string{
		"", "# none\n", "a.example be_a\n", "a.example be_a", "a.example  be_a \r\n# c\n",
		"a.example be_a\nb.example be_b\n", "b.example be_b\na.example be_a\n",
		"a.example be_a\nb.example be_b\nc.example be_c\n", "a.example be_a\nb.example be_b\nc.example be_d\n",
		"a.example be_a\nb.example be_b\nc.example be_c\nd.example be_d\n",
		"a.example be_ab\nb.example be_b\n", "a.example be_a b\n", "a.example be_a\n\n\n",
		"a.example\n", "long.example.com be_long_long_long\n",
	}
	for _, limit := range []int{16, 32, defaultMapPayload} {
		for _, o := range contents {
			for _, n := range contents {
				np, _, nerr := mapPayloads([]byte(n), limit)
				if nerr != nil {
					continue
				}
				op, oEntries, oerr := mapPayloads([]byte(o), limit)
				same, entries, err := samePayloads([]byte(o), limit, np)
				if (err != nil) != (oerr != nil) || entries != oEntries {
					t.Errorf("limit %d, %q: entries %d, error %v; mapPayloads: %d, %v", limit, o, entries, err, oEntries, oerr)
				}
				if want := oerr == nil && reflect.DeepEqual(op, np); err == nil && same != want {
					t.Errorf("limit %d: samePayloads(%q) against the payloads of %q = %v, want %v", limit, o, n, same, want)
				}
			}
		}
	}
}

// BenchmarkPlanMapChanged plans a change of one entry of a map of 20,000 entries (two per route
// at 10,000 Ingresses), as each route change at that size does.
func BenchmarkPlanMapChanged(b *testing.B) {
	var old, next strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&old, "ing-%05d.example.com/ web_svc-%05d_80\ning-%05d.example.com/api web_svc-%05d_80\n", i, i, i, (i+1)%10000)
	}
	next.WriteString(strings.Replace(old.String(), "ing-05000.example.com/api web_svc-05001_80", "ing-05000.example.com/v2 web_svc-05001_80", 1))
	base := mapCfg("", "a 10.0.0.1:80 check")
	u := track(New(Options{SSLDir: ssl, MapsDir: mapsDir, Client: &fakeClient{}}))
	u.Reloaded(u.Plan(base, nil, files(map[string]string{"hosts.map": old.String()})))
	changed := files(map[string]string{"hosts.map": next.String()})
	b.ReportAllocs()
	for b.Loop() {
		if p := u.Plan(base, nil, changed); p.Reload() != "" {
			b.Fatal(p.Reload())
		}
	}
}
