package runtimeapi

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

const routes = mapsDir + "/hosts.map"

// beCfg renders a configuration that routes by host through hosts.map, with the defaults
// section named web (defaults is the whole header line), and backends (each "NAME" and its
// lines, servers included).
func beCfg(defaults string, backends ...string) []byte {
	var b strings.Builder
	b.WriteString("global\n    maxconn 100\n\n" + defaults + "\n    mode http\n    balance roundrobin\n    default-server inter 2s fall 3 rise 2\n\n")
	b.WriteString("frontend fe\n    bind :80\n    use_backend %[req.hdr(host),lower,map(" + routes + ",be_default)]\n    default_backend be_default\n\n")
	b.WriteString("backend be_default\n    http-request return status 404\n")
	for _, be := range backends {
		name, lines, _ := strings.Cut(be, "\n")
		b.WriteString("\nbackend " + name + "\n")
		for _, l := range strings.Split(lines, "\n") {
			if l != "" {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	return []byte(b.String())
}

// on returns an Updater that knows HAProxy runs config (and maps) and is of version v ("" not
// known).
func on(t *testing.T, v string, config []byte, maps map[string][]byte, fc *fakeClient) *tracked {
	t.Helper()
	if fc == nil {
		fc = &fakeClient{}
	}
	u := track(New(Options{SSLDir: ssl, MapsDir: mapsDir, Client: fc}))
	u.Reloaded(u.Plan(config, nil, maps))
	if v != "" {
		u.live.version = parseVersion(v)
	}
	return u
}

// TestPlanBackends: whole backends added and removed through the runtime API on HAProxy 3.4 and
// later, only when the result is exactly what a reload would load; anything else reloads,
// with the reason. A pure function of what HAProxy runs (its version included) and the
// rendering.
func TestPlanBackends(t *testing.T) {
	base := beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check")
	cases := []struct {
		name    string
		version string
		base    []byte // default: base
		next    []byte
		reload  string   // substring of the reason; "" for none
		cmds    []string // the commands, runtime only
	}{
		{name: "a new backend: made from its named defaults, its servers with the inherited parameters, then published",
			version: "3.4.7-1",
			next:    beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b\nserver b1 10.0.0.2:80 check\nserver b2 10.0.0.3:80 weight 5 disabled"),
			cmds: []string{"add backend be_b from web",
				"add server be_b/b1 10.0.0.2:80 inter 2s fall 3 rise 2 check", "enable health be_b/b1", "enable server be_b/b1",
				"add server be_b/b2 10.0.0.3:80 inter 2s fall 3 rise 2 weight 5",
				"publish backend be_b"}},
		{name: "a new backend without servers", version: "3.5.0",
			next: beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b"),
			cmds: []string{"add backend be_b from web", "publish backend be_b"}},
		{name: "a new backend naming its defaults with from, and default-server lines of its own", version: "3.4.7-1",
			next: []byte(string(base) + "\nbackend be_b from web\n    default-server maxconn 10\n    server b1 10.0.0.2:80\n"),
			cmds: []string{"add backend be_b from web", "add server be_b/b1 10.0.0.2:80 inter 2s fall 3 rise 2 maxconn 10", "enable server be_b/b1", "publish backend be_b"}},
		{name: "a removed backend: unpublished, its servers in maintenance and deleted, then deleted", version: "3.4.7-1",
			next: beCfg("defaults web"),
			cmds: []string{"unpublish backend be_a", "set server be_a/a1 state maint", "del server be_a/a1", "del backend be_a"}},
		{name: "a backend renamed: one added, one removed", version: "3.4.7-1",
			next: beCfg("defaults web", "be_z\nserver a1 10.0.0.1:80 check"),
			cmds: []string{"add backend be_z from web", "add server be_z/a1 10.0.0.1:80 inter 2s fall 3 rise 2 check", "enable health be_z/a1", "enable server be_z/a1", "publish backend be_z",
				"unpublish backend be_a", "set server be_a/a1 state maint", "del server be_a/a1", "del backend be_a"}},

		{name: "HAProxy 3.2: a new backend reloads", version: "3.2.26-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b"),
			reload: `backend "be_b" is new (HAProxy 3.2.26-1 cannot add or remove backends at runtime; 3.4 can)`},
		{name: "HAProxy 3.2: a removed backend reloads", version: "3.2.26-1",
			next:   beCfg("defaults web"),
			reload: `backend "be_a" was removed (HAProxy 3.2.26-1 cannot`},
		{name: "HAProxy's version not known: reloads",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b"),
			reload: `backend "be_b" is new (HAProxy's version is not known yet`},
		{name: "defaults without a name", version: "3.4.7-1",
			base:   beCfg("defaults", "be_a\nserver a1 10.0.0.1:80 check"),
			next:   beCfg("defaults", "be_a\nserver a1 10.0.0.1:80 check", "be_b"),
			reload: `backend "be_b" is new and its defaults section has no name`},
		{name: "a line of its own", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b\nbalance leastconn\nserver b1 10.0.0.2:80"),
			reload: `backend "be_b" is new and has a "balance" line of its own`},
		{name: "a server add server does not take", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b\nserver b1 10.0.0.2:80 cookie b1"),
			reload: `"cookie" cannot be given to add server`},
		{name: "a server address that is a host name", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b\nserver b1 web.local:80"),
			reload: `not an IP address`},
		{name: "the name of a frontend", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "fe"),
			reload: `backend "fe" is new and its name is also the name of frontend "fe"`},
		{name: "named by the frontend (which changed)", version: "3.4.7-1",
			next: []byte(strings.Replace(string(beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b")),
				"    default_backend be_default", "    use_backend be_b if { path_beg /b }\n    default_backend be_default", 1)),
			reload: `backend "be_b" is new and a section names it`},
		{name: "a new backend another new one names", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_t\nserver t1 10.0.0.9:80 track be_u/u1", "be_u\nserver u1 10.0.0.8:80 check"),
			reload: `backend "be_u" is new and a section names it`},
		{name: "a new section of another kind", version: "3.4.7-1",
			next:   []byte(string(base) + "\nlisten stats\n    bind :8404\n"),
			reload: `listen "stats" is new`},
		{name: "conditional blocks", version: "3.4.7-1",
			next:   []byte(string(beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_b")) + ".if defined(X)\n.endif\n"),
			reload: `conditional blocks`},
		{name: "a name the runtime API cannot write", version: "3.4.7-1",
			next:   beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be/b"),
			reload: `not a valid HAProxy name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := base
			if c.base != nil {
				from = c.base
			}
			u := on(t, c.version, from, nil, nil)
			p := u.Plan(c.next, nil, nil)
			if c.reload != "" {
				if !strings.Contains(p.Reload(), c.reload) {
					t.Fatalf("reload reason %q, want one containing %q", p.Reload(), c.reload)
				}
				for _, cmd := range p.Commands() {
					if strings.Contains(cmd, "backend ") {
						t.Fatalf("a plan that reloads makes backends at runtime: %q", p.Commands())
					}
				}
				return
			}
			if p.Reload() != "" {
				t.Fatalf("reload asked: %s", p.Reload())
			}
			if got := p.Commands(); !reflect.DeepEqual(got, c.cmds) {
				t.Fatalf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.cmds, "\n"))
			}
		})
	}
	t.Run("a removed backend another section named", func(t *testing.T) {
		tracker := beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80 check", "be_t\nserver t1 10.0.0.9:80 track be_a/a1")
		u := on(t, "3.4.7-1", tracker, nil, nil)
		p := u.Plan(beCfg("defaults web", "be_t\nserver t1 10.0.0.9:80 track be_a/a1"), nil, nil)
		if want := `backend "be_a" was removed and a section named it`; !strings.Contains(p.Reload(), want) {
			t.Fatalf("reload reason %q, want %q", p.Reload(), want)
		}
	})
	t.Run("counted by kind", func(t *testing.T) {
		u := on(t, "3.4.7-1", base, nil, nil)
		p := u.Plan(beCfg("defaults web", "be_b\nserver b1 10.0.0.2:80", "be_c"), nil, nil)
		if got := p.Summary(); got != "2 backend_added, 1 backend_removed" {
			t.Fatalf("summary %q", got)
		}
	})
}

// TestApplyBackends: the order of the commands that add and remove backends around the map
// that routes to them, and a removed backend whose server still has connections kept
// (unpublished) until the server can be deleted.
func TestApplyBackends(t *testing.T) {
	ctx := context.Background()
	hosts := func(kv string) map[string][]byte { return map[string][]byte{"hosts.map": []byte(kv)} }
	base := beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80")
	t.Run("added before the map routes to it, removed after", func(t *testing.T) {
		fc := &fakeClient{answer: backendAnswers(nil)}
		u := on(t, "3.4.7-1", base, hosts("a.test be_a\n"), fc)
		p := u.Plan(beCfg("defaults web", "be_b\nserver b1 10.0.0.2:80"), nil, hosts("b.test be_b\n"))
		if p.Reload() != "" {
			t.Fatal(p.Reload())
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"add backend be_b from web", "add server be_b/b1 10.0.0.2:80 inter 2s fall 3 rise 2", "enable server be_b/b1", "publish backend be_b",
			"show map", "show acl", "add map " + routes + " b.test be_b", "del map " + routes + " a.test",
			"unpublish backend be_a", "set server be_a/a1 state maint", "del server be_a/a1",
			"del backend be_a",
		}
		if got := fc.commands(); !reflect.DeepEqual(got, want) {
			t.Fatalf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if v := u.live.Version(); v.Full != "3.4.7-1" {
			t.Fatalf("version %v after the update, want the one show info gives", v)
		}
	})
	t.Run("a server with connections keeps its backend until Tidy deletes both", func(t *testing.T) {
		busy := true
		fc := &fakeClient{answer: backendAnswers(func(cmd string) string {
			if busy && strings.HasPrefix(cmd, "del server") {
				return "Server still has connections attached to it, cannot remove it.\n"
			}
			return ""
		})}
		u := on(t, "3.4.7-1", base, nil, fc)
		empty := beCfg("defaults web")
		if err := u.Apply(ctx, u.Plan(empty, nil, nil)); err != nil {
			t.Fatal(err)
		}
		for _, c := range fc.commands() {
			if strings.HasPrefix(c, "del backend") {
				t.Fatalf("backend deleted while its server has connections: %q", fc.commands())
			}
		}
		if p := u.Plan(base, nil, nil); !strings.Contains(p.Reload(), "HAProxy still holds the backend of that name") {
			t.Fatalf("the backend added back while HAProxy holds it: %q, want a reload", p.Reload())
		}
		if left := u.Tidy(ctx); left != 2 {
			t.Fatalf("Tidy: %d left, want the server and its backend", left)
		}
		busy = false
		if left := u.Tidy(ctx); left != 0 {
			t.Fatalf("Tidy: %d left once the server has no connections", left)
		}
		if got := fc.commands(); got[len(got)-2] != "del server be_a/a1" || got[len(got)-1] != "del backend be_a" {
			t.Fatalf("Tidy sent %q, want the server then the backend deleted", got)
		}
		p := u.Plan(base, nil, nil)
		if p.Reload() != "" || len(p.Commands()) == 0 || p.Commands()[0] != "add backend be_a from web" {
			t.Fatalf("the backend added back once gone: reload %q, commands %q", p.Reload(), p.Commands())
		}
	})
	t.Run("a server HAProxy had an idle connection to is asked again: the backend goes at once", func(t *testing.T) {
		tries := 0
		fc := &fakeClient{answer: backendAnswers(func(cmd string) string {
			if strings.HasPrefix(cmd, "del server") {
				if tries++; tries == 1 {
					return "Server still has connections attached to it, cannot remove it.\n"
				}
			}
			return ""
		})}
		u := on(t, "3.4.7-1", base, nil, fc)
		if err := u.Apply(ctx, u.Plan(beCfg("defaults web"), nil, nil)); err != nil {
			t.Fatal(err)
		}
		got := fc.commands()
		if want := []string{"del server be_a/a1", "del server be_a/a1", "del backend be_a"}; !reflect.DeepEqual(got[len(got)-3:], want) {
			t.Fatalf("sent %q, want it to end with %q", got, want)
		}
		if left := u.Tidy(ctx); left != 0 {
			t.Fatalf("Tidy: %d left", left)
		}
	})
	t.Run("a refusal fails the update (the caller reloads)", func(t *testing.T) {
		fc := &fakeClient{answer: backendAnswers(func(cmd string) string {
			if strings.HasPrefix(cmd, "add backend") {
				return "Cannot find default proxy 'web'.\n\n"
			}
			return ""
		})}
		u := on(t, "3.4.7-1", base, nil, fc)
		if err := u.Apply(ctx, u.Plan(beCfg("defaults web", "be_a\nserver a1 10.0.0.1:80", "be_b"), nil, nil)); err == nil || !strings.Contains(err.Error(), "Cannot find default proxy") {
			t.Fatalf("error %v, want HAProxy's answer", err)
		}
	})
}

// backendAnswers answers the backend commands as HAProxy 3.4.7 does, show info with its
// version, and the rest as success does; override answers first ("" for the default).
func backendAnswers(override func(cmd string) string) func(string) (string, error) {
	return func(cmd string) (string, error) {
		cmd = strings.TrimPrefix(cmd, "@1 ")
		if override != nil {
			if a := override(cmd); a != "" {
				return a, nil
			}
		}
		switch {
		case cmd == "show info":
			return "Name: HAProxy\nVersion: 3.4.7-1\nRelease_date: 2026/10/14\nPid: 1234\n", nil
		case strings.HasPrefix(cmd, "add backend"):
			return "New backend registered.\n\n", nil
		case strings.HasPrefix(cmd, "publish backend"):
			return "Backend published.\n\n", nil
		case strings.HasPrefix(cmd, "unpublish backend"):
			return "Backend unpublished.\n\n", nil
		case strings.HasPrefix(cmd, "del backend"):
			// What 3.4.7 answers: its servers' deletion reported again, then the backend's.
			return "Server x/s1 is going DOWN for maintenance. 0 active and 0 backup servers left.\nbackend 'x' has no server available!\nServer deleted.\nBackend deleted.\n\n", nil
		}
		return "", nil
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in           string
		major, minor int
		at34         bool
	}{
		{"3.4.7-1", 3, 4, true}, {"3.5-dev2", 3, 5, true}, {"4.0.0", 4, 0, true},
		{"3.2.26-1", 3, 2, false}, {"2.6.12-1+deb12u4", 2, 6, false}, {"", 0, 0, false}, {"x", 0, 0, false},
	} {
		v := parseVersion(c.in)
		if v.Major != c.major || v.Minor != c.minor || v.AtLeast(3, 4) != c.at34 {
			t.Errorf("parseVersion(%q) = %+v, AtLeast(3, 4) %v", c.in, v, v.AtLeast(3, 4))
		}
	}
}
