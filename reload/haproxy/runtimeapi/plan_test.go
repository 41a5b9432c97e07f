package runtimeapi

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const ssl = "/etc/haproxy/certs"

// cfg renders a small configuration: the defaults, a frontend binding the certificates named
// in crts (a file name, or "DIR" for the whole directory), and backend be_web with servers.
func cfg(crts []string, servers ...string) []byte {
	var b strings.Builder
	b.WriteString("global\n    maxconn 100\n\ndefaults\n    mode http\n    default-server inter 2s fall 3 rise 2\n\n")
	b.WriteString("frontend fe\n    bind :80\n")
	if len(crts) > 0 {
		b.WriteString("    bind :443 ssl")
		for _, c := range crts {
			if c == "DIR" {
				b.WriteString(" crt " + ssl + "/")
			} else {
				b.WriteString(" crt " + ssl + "/" + c)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("    default_backend be_web\n\nbackend be_web\n    balance roundrobin\n")
	for _, s := range servers {
		b.WriteString("    server " + s + "\n")
	}
	return []byte(b.String())
}

// loaded returns an Updater that knows HAProxy runs config and certs.
func loaded(t *testing.T, config []byte, certs map[string][]byte) *tracked {
	t.Helper()
	u := track(New(Options{SSLDir: ssl, Client: &fakeClient{}}))
	p := u.Plan(config, certs, nil)
	if p.Reload() == "" {
		t.Fatal("the first plan must ask for a reload")
	}
	u.Reloaded(p)
	return u
}

func TestPlanServers(t *testing.T) {
	base := cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check")
	cases := []struct {
		name   string
		next   []byte
		reload string   // substring of the reason; "" for none
		cmds   []string // expected commands (runtime only)
	}{
		{name: "unchanged", next: base},
		{name: "comments and spacing do not count",
			next: []byte("# header\n" + strings.ReplaceAll(string(base), "    maxconn 100", "  maxconn    100\n\n# note")),
		},
		{name: "an apostrophe in a comment is a comment, not a quote",
			next: []byte(strings.ReplaceAll(string(base), "    balance roundrobin", "    balance roundrobin # the web's backend") +
				"    server c 10.0.0.3:80 check # it's new\n"),
			cmds: []string{"add server be_web/c 10.0.0.3:80 inter 2s fall 3 rise 2 check", "enable health be_web/c", "enable server be_web/c"}},
		{name: "server added, with the inherited default-server parameters",
			next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", "c 10.0.0.3:80 check weight 5"),
			cmds: []string{"add server be_web/c 10.0.0.3:80 inter 2s fall 3 rise 2 check weight 5", "enable health be_web/c", "enable server be_web/c"}},
		{name: "disabled server added stays in maintenance",
			next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", "c [fd00::3]:80 disabled"),
			cmds: []string{"add server be_web/c [fd00::3]:80 inter 2s fall 3 rise 2"}},
		{name: "server removed",
			next: cfg(nil, "a 10.0.0.1:80 check"),
			cmds: []string{"set server be_web/b state maint", "del server be_web/b"}},
		{name: "address and port changed on the running server, its health reset",
			next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.9:81 check"),
			cmds: []string{"set server be_web/b addr 10.0.0.9 port 81", "set server be_web/b health up"}},
		{name: "address changed and disabled: maintenance after",
			next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.9:80 check disabled"),
			cmds: []string{"set server be_web/b addr 10.0.0.9 port 80", "set server be_web/b state maint"}},
		{name: "weight and state",
			next: cfg(nil, "a 10.0.0.1:80 check weight 7", "b 10.0.0.2:80 check disabled"),
			cmds: []string{"set weight be_web/a 7", "set server be_web/b state maint"}},
		{name: "order: adds, then updates, then removes",
			next: cfg(nil, "b 10.0.0.2:80 check weight 2", "c 10.0.0.3:80 check"),
			cmds: []string{"add server be_web/c 10.0.0.3:80 inter 2s fall 3 rise 2 check", "enable health be_web/c", "enable server be_web/c",
				"set weight be_web/b 2", "set server be_web/a state maint", "del server be_web/a"}},
		{name: "reordered servers need nothing",
			next: cfg(nil, "b 10.0.0.2:80 check", "a 10.0.0.1:80 check")},
		{name: "other parameters changed", next: cfg(nil, "a 10.0.0.1:80 check inter 5s", "b 10.0.0.2:80 check"),
			reload: "parameters other than"},
		{name: "host name address", next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", "c web.local:80 check"),
			reload: "not an IP address"},
		{name: "keyword add server does not take", next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", "c 10.0.0.3:80 cookie c"),
			reload: `"cookie" cannot be given to add server`},
		{name: "unknown keyword", next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", "c 10.0.0.3:80 frobnicate"),
			reload: "does not know"},
		{name: "quoted argument", next: cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check", `c 10.0.0.3:80 check sni "str(x)"`),
			reload: "cannot be written"},
		{name: "frontend change", next: []byte(strings.Replace(string(base), "bind :80", "bind :8080", 1)),
			reload: `frontend "fe": a "bind" line changed`},
		{name: "new backend", next: []byte(string(base) + "\nbackend be_api\n    server x 10.0.1.1:80\n"),
			reload: `backend "be_api" is new`},
		{name: "removed backend", next: []byte(strings.Replace(string(base), "\nbackend be_web", "\nbackend be_other", 1)),
			reload: `backend "be_other" is new`},
		{name: "defaults change", next: []byte(strings.Replace(string(base), "inter 2s", "inter 3s", 1)),
			reload: `defaults section: a "default-server" line changed`},
		// The replicas of a peers section cannot change at runtime (examples/templates/peers.yaml).
		{name: "peers section added", next: []byte(string(base) + "\npeers mypeers\n    peer lb-1 10.0.9.1:10000\n"),
			reload: "peers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := loaded(t, base, nil)
			p := u.Plan(c.next, nil, nil)
			if c.reload != "" {
				if !strings.Contains(p.Reload(), c.reload) {
					t.Fatalf("reload reason %q, want one containing %q", p.Reload(), c.reload)
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
}

// TestPlanAddressChange: a new address or port never takes a running server out of traffic;
// only a server with its own health checks gets its health reset.
func TestPlanAddressChange(t *testing.T) {
	cases := []struct {
		name      string
		old, next string
		cmds      []string
	}{
		{name: "checked server", old: "b 10.0.0.2:80 check", next: "b 10.0.0.2:81 check",
			cmds: []string{"set server be_web/b addr 10.0.0.2 port 81", "set server be_web/b health up"}},
		{name: "no checks", old: "b 10.0.0.2:80", next: "b 10.0.0.3:80",
			cmds: []string{"set server be_web/b addr 10.0.0.3 port 80"}},
		{name: "tracking server: its health is the tracked one's", old: "b 10.0.0.2:80 track be_web/a", next: "b [fd00::2]:80 track be_web/a",
			cmds: []string{"set server be_web/b addr fd00::2 port 80"}},
		{name: "disabled stays in maintenance", old: "b 10.0.0.2:80 check disabled", next: "b 10.0.0.3:80 check disabled",
			cmds: []string{"set server be_web/b addr 10.0.0.3 port 80"}},
		{name: "enabled again: ready resets the health", old: "b 10.0.0.2:80 check disabled", next: "b 10.0.0.3:80 check",
			cmds: []string{"set server be_web/b addr 10.0.0.3 port 80", "set server be_web/b state ready"}},
		{name: "address and weight", old: "b 10.0.0.2:80 check", next: "b 10.0.0.3:80 check weight 256",
			cmds: []string{"set server be_web/b addr 10.0.0.3 port 80", "set server be_web/b health up", "set weight be_web/b 256"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := loaded(t, cfg(nil, "a 10.0.0.1:80 check", c.old), nil)
			p := u.Plan(cfg(nil, "a 10.0.0.1:80 check", c.next), nil, nil)
			if p.Reload() != "" {
				t.Fatalf("reload asked: %s", p.Reload())
			}
			if got := p.Commands(); !reflect.DeepEqual(got, c.cmds) {
				t.Fatalf("commands %q, want %q", got, c.cmds)
			}
			if p.Counts()[KindServerUpdated] != 1 {
				t.Fatalf("counts %v", p.Counts())
			}
		})
	}
}

func TestPlanCertificates(t *testing.T) {
	pemA, pemB := []byte("-----BEGIN X-----\nAAAA\n\n-----END X-----\n"), []byte("-----BEGIN X-----\r\nBBBB\r\n-----END X-----\r\n")
	cases := []struct {
		name       string
		crts       []string
		old, new   map[string][]byte
		newCrts    []string
		reload     string
		cmds       []string
		payloadHas string
	}{
		{name: "content of a bound file", crts: []string{"a.pem"},
			old: map[string][]byte{"a": pemA}, new: map[string][]byte{"a": pemB},
			cmds:       []string{"set ssl cert " + ssl + "/a.pem <<", "commit ssl cert " + ssl + "/a.pem"},
			payloadHas: "-----BEGIN X-----\nBBBB\n-----END X-----"},
		{name: "file nobody loads", crts: []string{"a.pem"},
			old: map[string][]byte{"a": pemA, "z": pemA}, new: map[string][]byte{"a": pemA, "z": pemB}},
		{name: "new file in a bound directory", crts: []string{"DIR"},
			old: map[string][]byte{"a": pemA}, new: map[string][]byte{"a": pemA, "b": pemB},
			cmds: []string{"new ssl cert " + ssl + "/b.pem", "set ssl cert " + ssl + "/b.pem <<", "commit ssl cert " + ssl + "/b.pem",
				"add ssl crt-list " + ssl + " " + ssl + "/b.pem"}},
		{name: "file removed from a bound directory", crts: []string{"DIR"},
			old: map[string][]byte{"a": pemA, "b": pemB}, new: map[string][]byte{"a": pemA},
			cmds: []string{"del ssl crt-list " + ssl + " " + ssl + "/b.pem", "del ssl cert " + ssl + "/b.pem"}},
		{name: "new file named on a bind line", crts: []string{"a.pem"}, newCrts: []string{"a.pem", "b.pem"},
			old: map[string][]byte{"a": pemA}, new: map[string][]byte{"a": pemA, "b": pemB},
			reload: `frontend "fe": a "bind" line changed`},
		{name: "empty PEM", crts: []string{"a.pem"},
			old: map[string][]byte{"a": pemA}, new: map[string][]byte{"a": []byte("\n\n")}, reload: "empty PEM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			servers := []string{"a 10.0.0.1:80"}
			u := loaded(t, cfg(c.crts, servers...), c.old)
			newCrts := c.crts
			if c.newCrts != nil {
				newCrts = c.newCrts
			}
			p := u.Plan(cfg(newCrts, servers...), c.new, nil)
			if c.reload != "" {
				if !strings.Contains(p.Reload(), c.reload) {
					t.Fatalf("reload reason %q, want %q", p.Reload(), c.reload)
				}
				return
			}
			if p.Reload() != "" {
				t.Fatalf("reload asked: %s", p.Reload())
			}
			if got := p.Commands(); !reflect.DeepEqual(got, c.cmds) {
				t.Fatalf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.cmds, "\n"))
			}
			if c.payloadHas != "" && p.steps[0].cmds[0].payload != c.payloadHas {
				t.Fatalf("payload %q, want %q", p.steps[0].cmds[0].payload, c.payloadHas)
			}
		})
	}
}

// TestPlanPartial: when a reload is needed anyway, the server changes of backends that exist in
// both are still planned (to be made while the reload waits), and the target keeps the old
// non-server lines.
func TestPlanPartial(t *testing.T) {
	base := cfg(nil, "a 10.0.0.1:80 check")
	u := loaded(t, base, nil)
	next := []byte(strings.Replace(string(cfg(nil, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check")), "bind :80", "bind :81", 1))
	p := u.Plan(next, nil, nil)
	if !strings.Contains(p.Reload(), "bind") || p.Changes() != 1 {
		t.Fatalf("reason %q, %d changes", p.Reload(), p.Changes())
	}
	if err := u.Apply(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// HAProxy now runs the old frontend with both servers: the new rendering still needs a
	// reload, but no server change; the old rendering needs b removed.
	if p2 := u.Plan(next, nil, nil); !strings.Contains(p2.Reload(), "bind") || p2.Changes() != 0 {
		t.Fatalf("after the partial update: reason %q, %d changes", p2.Reload(), p2.Changes())
	}
	p3 := u.Plan(base, nil, nil)
	if p3.Reload() != "" || !reflect.DeepEqual(p3.Commands(), []string{"set server be_web/b state maint", "del server be_web/b"}) {
		t.Fatalf("back to the old rendering: reason %q, commands %q", p3.Reload(), p3.Commands())
	}
}

func TestPlanBeforeAnythingIsKnown(t *testing.T) {
	u := track(New(Options{Client: &fakeClient{}}))
	p := u.Plan(cfg(nil), nil, nil)
	if !strings.Contains(p.Reload(), "not known") {
		t.Fatalf("reason %q", p.Reload())
	}
	if err := u.Apply(context.Background(), p); err == nil {
		t.Fatal("Apply of a plan made against nothing succeeded")
	}
	if p := u.Plan([]byte("backend b\n  server x\n"), nil, nil); !strings.Contains(p.Reload(), "cannot be compared") {
		t.Fatalf("unreadable config: reason %q", p.Reload())
	}
}

func TestPlanSummary(t *testing.T) {
	u := loaded(t, cfg(nil, "a 10.0.0.1:80"), nil)
	p := u.Plan(cfg(nil, "b 10.0.0.2:80", "c 10.0.0.3:80"), nil, nil)
	if got := p.Summary(); got != "2 server_added, 1 server_removed" {
		t.Fatalf("summary %q", got)
	}
	if got := fmt.Sprint(p.Counts()); got != "map[server_added:2 server_removed:1]" {
		t.Fatalf("counts %s", got)
	}
}

// TestPlanPeersChange: a replica added to or removed from a peers section, or localpeer
// changed, is a reload (peers cannot change at runtime), whatever else changed with it.
func TestPlanPeersChange(t *testing.T) {
	withPeers := func(local string, peers ...string) []byte {
		b := strings.Replace(string(cfg(nil, "a 10.0.0.1:80 check")), "    maxconn 100\n", "    maxconn 100\n    localpeer "+local+"\n", 1)
		b += "\npeers mypeers\n"
		for _, p := range peers {
			b += "    peer " + p + "\n"
		}
		return []byte(b)
	}
	base := withPeers("lb-1", "lb-1 10.0.9.1:10000", "lb-2 10.0.9.2:10000")
	for name, next := range map[string][]byte{
		"replica added":     withPeers("lb-1", "lb-1 10.0.9.1:10000", "lb-2 10.0.9.2:10000", "lb-3 10.0.9.3:10000"),
		"replica removed":   withPeers("lb-1", "lb-1 10.0.9.1:10000"),
		"replica moved":     withPeers("lb-1", "lb-1 10.0.9.1:10000", "lb-2 10.0.9.7:10000"),
		"localpeer changed": withPeers("lb-2", "lb-1 10.0.9.1:10000", "lb-2 10.0.9.2:10000"),
	} {
		t.Run(name, func(t *testing.T) {
			u := loaded(t, base, nil)
			if p := u.Plan(base, nil, nil); p.Reload() != "" {
				t.Fatalf("unchanged: reload asked: %s", p.Reload())
			}
			if p := u.Plan(next, nil, nil); p.Reload() == "" {
				t.Fatalf("no reload asked; commands %v", p.Commands())
			}
		})
	}
}
