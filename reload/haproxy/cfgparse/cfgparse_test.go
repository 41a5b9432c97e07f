package cfgparse

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{"", nil},
		{"   \t ", nil},
		{"  server a 1.2.3.4:80   check\tinter 2s", []string{"server", "a", "1.2.3.4:80", "check", "inter", "2s"}},
		{`http-request set-header X "a b"  c`, []string{"http-request", "set-header", "X", `"a b"`, "c"}},
		{`acl x path_beg 'it''s'`, []string{"acl", "x", "path_beg", `'it''s'`}},
		{`stats realm HAProxy\ Statistics`, []string{"stats", "realm", `HAProxy\ Statistics`}},
		{`x "a \" b" y`, []string{"x", `"a \" b"`, "y"}},
		{"bind :80 # a comment", []string{"bind", ":80", "#", "a", "comment"}},
		// HAProxy reads an unquoted # as a comment even inside a word, and a quote in a
		// comment opens nothing (haproxy -c accepts both lines).
		{"timeout client 10s # it's short", []string{"timeout", "client", "10s", "#", "it's", "short"}},
		{"server s1 10.0.0.1:80 check#it's", []string{"server", "s1", "10.0.0.1:80", "check", "#it's"}},
		{`x "a # b" # c "d`, []string{"x", `"a # b"`, "#", "c", `"d`}},
		{"crlf line\r", []string{"crlf", "line"}},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			got, err := Words(c.line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Words(%q) = %q, want %q", c.line, got, c.want)
			}
		})
	}
	t.Run("unterminated quote", func(t *testing.T) {
		if _, err := Words(`x "abc`); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", `"a b"`: "a b", `'a"b'`: `a"b`, `a\ b`: "a b", `"x\"y"`: `x"y`, `pre"mid"post`: "premidpost",
	} {
		if got := Unquote(in); got != want {
			t.Errorf("Unquote(%q) = %q, want %q", in, got, want)
		}
	}
}

const sample = `# leading comment
global
    maxconn 100
    stats socket /run/haproxy.sock mode 600 level admin

defaults base
    mode http
    default-server inter 2s fall 3 rise 2

defaults tcp from base
    mode tcp
    default-server inter 5s

frontend http
    bind :80
    bind :443 ssl crt /ssl/a.pem crt /ssl//b.pem crt /ssl/
    default_backend be_web

backend be_web from base
    balance roundrobin
    server web-1 10.0.0.1:8080 check weight 5
    default-server maxconn 10
    server web-2 [fd00::2]:8080 check disabled # comment here
    server web-3 web.local:8080
    server web-4 10.0.0.4
    server web-5 10.0.0.5:+1

listen db from tcp
    bind :5432
    server db-1 10.0.1.1:5432 check

peers mypeers
    server p1 10.9.9.9:1024
`

func TestParse(t *testing.T) {
	c, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range c.Sections {
		keys = append(keys, s.Key())
	}
	want := []string{" ", "global ", "defaults base", "defaults tcp", "frontend http", "backend be_web", "listen db", "peers mypeers"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("sections %q, want %q", keys, want)
	}
	t.Run("lines keep words as written, without servers", func(t *testing.T) {
		be := c.Proxy("backend", "be_web")
		if !reflect.DeepEqual(be.Lines, []string{"balance roundrobin", "default-server maxconn 10"}) {
			t.Fatalf("lines %q", be.Lines)
		}
		if len(be.Servers) != 5 {
			t.Fatalf("%d servers", len(be.Servers))
		}
		peers := c.Proxy("peers", "mypeers")
		if len(peers.Servers) != 0 || len(peers.Lines) != 1 {
			t.Fatalf("peers servers are plain lines: %+v", peers)
		}
	})
	t.Run("servers", func(t *testing.T) {
		be := c.Proxy("backend", "be_web")
		s1, s2, s3, s4, s5 := be.Servers[0], be.Servers[1], be.Servers[2], be.Servers[3], be.Servers[4]
		a1, p1 := s1.AddrPort()
		if s1.Name != "web-1" || a1 != netip.MustParseAddr("10.0.0.1") || p1 != 8080 || !s1.HostPort() {
			t.Errorf("web-1: %+v", s1)
		}
		if a2, p2 := s2.AddrPort(); a2 != netip.MustParseAddr("fd00::2") || p2 != 8080 {
			t.Errorf("web-2: %+v", s2)
		}
		if !reflect.DeepEqual(s2.Params, []string{"check", "disabled"}) {
			t.Errorf("web-2 params %q (comment must be dropped)", s2.Params)
		}
		for _, s := range []*Server{s3, s4, s5} {
			if s.HostPort() {
				t.Errorf("%s: %q is not an IP literal with a port", s.Name, s.Address)
			}
		}
		if got := strings.Join(s1.Inherited, " "); got != "inter 2s fall 3 rise 2" {
			t.Errorf("web-1 inherits %q", got)
		}
		if got := strings.Join(s2.Inherited, " "); got != "inter 2s fall 3 rise 2 maxconn 10" {
			t.Errorf("web-2 inherits %q (default-server lines above it count)", got)
		}
		db := c.Proxy("listen", "db").Servers[0]
		if got := strings.Join(db.Inherited, " "); got != "inter 2s fall 3 rise 2 inter 5s" {
			t.Errorf("db-1 inherits %q (from tcp, which is from the unnamed defaults)", got)
		}
	})
	t.Run("settings", func(t *testing.T) {
		be := c.Proxy("backend", "be_web")
		st := be.Servers[0].Settings()
		if !st.Known || st.Weight != 5 || st.Disabled || !st.Check {
			t.Errorf("web-1 settings %+v", st)
		}
		st2 := be.Servers[1].Settings()
		if !st2.Known || st2.Weight != 1 || !st2.Disabled || !st2.Check {
			t.Errorf("web-2 settings %+v", st2)
		}
		if SameParams(st.Params, st2.Params) {
			t.Error("web-1 and web-2 differ by maxconn, SameParams says equal")
		}
	})
	t.Run("conditional blocks", func(t *testing.T) {
		c, err := Parse([]byte("backend b\n.if defined(X)\n  server a 1.1.1.1:80\n.endif\n"))
		if err != nil || !c.Conditional {
			t.Fatalf("Conditional not set (%v)", err)
		}
		if c.Conditional && c.Proxy("backend", "b") == nil {
			t.Fatal("no backend")
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, bad := range []string{"backend b\n  server a\n", "global\n  log \"x\n"} {
			if _, err := Parse([]byte(bad)); err == nil {
				t.Errorf("Parse(%q): no error", bad)
			}
		}
	})
}

func TestSettings(t *testing.T) {
	cases := []struct {
		inherited, own string
		want           Settings
	}{
		{"", "", Settings{Known: true, Weight: 1}},
		{"weight 10 disabled", "enabled", Settings{Known: true, Weight: 10}},
		{"check", "no-check weight 3", Settings{Known: true, Weight: 3, Params: []Param{{"check", nil}, {"no-check", nil}}}},
		{"", "check inter 2s agent-check", Settings{Known: true, Weight: 1, Check: true, Agent: true,
			Params: []Param{{"check", nil}, {"inter", []string{"2s"}}, {"agent-check", nil}}}},
		{"", "frobnicate 3", Settings{Known: false, Weight: 1}},
		{"", "inter", Settings{Known: false, Weight: 1}},
		{"", "weight x", Settings{Known: false, Weight: 1}},
	}
	for _, c := range cases {
		t.Run(c.inherited+"|"+c.own, func(t *testing.T) {
			s := &Server{Inherited: strings.Fields(c.inherited), Params: strings.Fields(c.own)}
			got := s.Settings()
			got.Raw = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestCertUse(t *testing.T) {
	c, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	u := c.CertUse("/ssl")
	if !reflect.DeepEqual(u.Files, map[string][]string{"a.pem": {"/ssl/a.pem"}, "b.pem": {"/ssl//b.pem"}}) {
		t.Errorf("files %v", u.Files)
	}
	if !reflect.DeepEqual(u.Dirs, []string{"/ssl"}) || u.OtherDir || len(u.Other) != 0 {
		t.Errorf("dirs %q other %v %v", u.Dirs, u.Other, u.OtherDir)
	}
	t.Run("other uses", func(t *testing.T) {
		c, _ := Parse([]byte(`frontend f
    bind :443 ssl crt /ssl/a.pem ca-file /ssl/ca.pem
backend b
    server s 1.1.1.1:443 ssl crt /ssl/client.pem
`))
		u := c.CertUse("/ssl")
		if !u.Other["ca.pem"] || !u.Other["client.pem"] || u.Other["a.pem"] || u.OtherDir {
			t.Errorf("other %v dir %v", u.Other, u.OtherDir)
		}
		if !u.Used("a.pem") || u.Used("unused.pem") {
			t.Error("Used")
		}
		for _, cfg := range []string{
			"global\n    crt-base /ssl\n",
			"frontend f\n    bind :443 ssl crt-list /ssl/list.txt crt /ssl/sub/x.pem\n",
			"frontend f\n    http-request set-var(txn.x) str(/ssl-other/x)\n",
		} {
			c, _ := Parse([]byte(cfg))
			if u := c.CertUse("/ssl"); !u.OtherDir && len(u.Other) == 0 {
				t.Errorf("%q: not seen as another use", cfg)
			}
		}
	})
}

// TestServersShareParamsExactly: servers with equal parameters share one list, and only them.
func TestServersShareParamsExactly(t *testing.T) {
	c, err := Parse([]byte("backend be\n  server s1 10.0.0.1:80 a\x00b\n  server s2 10.0.0.2:80 a b\n  server s3 10.0.0.3:80 a b\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Proxy("backend", "be").Servers
	if !reflect.DeepEqual(s[0].Params, []string{"a\x00b"}) || !reflect.DeepEqual(s[1].Params, []string{"a", "b"}) {
		t.Errorf("params %q and %q", s[0].Params, s[1].Params)
	}
	if &s[1].Params[0] != &s[2].Params[0] {
		t.Error("equal parameter lists are not shared")
	}
}
