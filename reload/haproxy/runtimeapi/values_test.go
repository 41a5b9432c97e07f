package runtimeapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// The issue's payload: a value carrying a line break and a server line after it.
const evil = "35461\n  server evil 6.6.6.6:80"

func TestValueChecks(t *testing.T) {
	cases := []struct {
		name  string
		check func(string) error
		ok    []string
		bad   []string
	}{
		{name: "names", check: func(v string) error { return checkName("server", v) },
			ok:  []string{"web-0", "be_web", "a.b:c", "X9"},
			bad: []string{"", "a b", "a\nb", "a;b", "a/b", "a+b", "é", "a\x00", "a\tb", evil}},
		{name: "tokens", check: checkToken,
			ok:  []string{"2s", "h2,http/1.1", "/etc/ca.pem", "TLSv1.2", "é"},
			bad: []string{"", "a b", "a\nb", "a\rb", "a\tb", "a\vb", "a\fb", "a\x00", "a\x1b[0m", "a\x7f", "a\u0085b", "a\u2028b", "a\u00a0b", "a;b", "a#b", "a$b", `a"b`, "a'b", `a\b`, "\xff", evil}},
		{name: "addresses", check: checkAddr,
			ok:  []string{"10.0.0.1", "fd00::1", "web.local", "a-b.example.com.", "localhost"},
			bad: []string{"", "10.0.0.1 port 80", "fe80::1%eth0", "-a.b", "a..b", "a_b.c", "10.0.0.1\n", evil}},
		{name: "ports", check: checkPortWord,
			ok:  []string{"1", "80", "65535"},
			bad: []string{"", "0", "65536", "80x", "-1", "+80", " 80", "8 0", evil}},
		{name: "paths", check: checkPath,
			ok:  []string{"/etc/haproxy/certs/a.pem", "/x/a.b-c_d.pem"},
			bad: []string{"", "certs/a.pem", "/etc/my certs/a.pem", "/x/a.pem\nshow info", "/x/<<.pem", "/x/a;b.pem", "/" + evil}},
		{name: "times", check: checkTime,
			ok:  []string{"2s", "100ms", "3", "1d"},
			bad: []string{"", "2 s", "2x", "s", "-1s", "9999999999"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range c.ok {
				if err := c.check(v); err != nil {
					t.Errorf("%q: %v", v, err)
				}
			}
			for _, v := range c.bad {
				err := c.check(v)
				if err == nil {
					t.Errorf("%q accepted", v)
				} else if strings.ContainsAny(err.Error(), "\n\r\x00") {
					t.Errorf("%q: the error shows a control character: %q", v, err)
				}
			}
		})
	}
	for _, w := range []int{0, 1, 256} {
		if err := checkWeight(w); err != nil {
			t.Errorf("weight %d: %v", w, err)
		}
	}
	for _, w := range []int{-1, 257, 1000} {
		if checkWeight(w) == nil {
			t.Errorf("weight %d accepted", w)
		}
	}
	for _, p := range []int{0, -1, 65536} {
		if checkPort(p) == nil {
			t.Errorf("port %d accepted", p)
		}
	}
}

// TestPlanRefusesValuesThatAreNotOneWord: a value the runtime API would send that is not one
// well-formed word makes the plan ask for a reload (which goes through haproxy -c) and hold no
// command for that change.
func TestPlanRefusesValuesThatAreNotOneWord(t *testing.T) {
	base := cfg([]string{"DIR"}, "a 10.0.0.1:80 check")
	certs := map[string][]byte{"a": []byte("-----BEGIN X-----\nAAAA\n-----END X-----\n")}
	cases := []struct {
		name   string
		next   []byte
		certs  map[string][]byte
		reason string
	}{
		{name: "server name with a control character", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b\x0bx 10.0.0.2:80 check"),
			reason: "not a valid HAProxy name"},
		{name: "quoted server name with a space", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", `"b show" 10.0.0.2:80 check`),
			reason: "not a valid HAProxy name"},
		{name: "address with a control character", next: cfg([]string{"DIR"}, "a 10.0.0.1:80\x0c check"),
			reason: "cannot be set at runtime"},
		{name: "weight out of range", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check weight 300"),
			reason: "weight 300 is not within 0-256"},
		{name: "new server, weight out of range", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check weight 1000"),
			reason: "weight 1000"},
		{name: "new server, parameter with a control character", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check sni str(x)\x00"),
			reason: "control character"},
		{name: "new server, parameter not of its form", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check port 99999"),
			reason: `"port": port 99999`},
		{name: "new server, check address not an address", next: cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check addr a_b"),
			reason: `"addr": address`},
		{name: "certificate name with the issue's payload", next: base,
			certs: map[string][]byte{"a": certs["a"], evil: certs["a"]}, reason: "cannot be written on the runtime API"},
		{name: "certificate name with a space", next: base,
			certs: map[string][]byte{"a": certs["a"], "b show info": certs["a"]}, reason: "cannot be written on the runtime API"},
		{name: "certificate with a control character", next: base,
			certs: map[string][]byte{"a": []byte("-----BEGIN X-----\nAA\x00AA\n-----END X-----\n")}, reason: "control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := loaded(t, base, certs)
			nc := c.certs
			if nc == nil {
				nc = certs
			}
			p := u.Plan(c.next, nc, nil)
			if !strings.Contains(p.Reload(), c.reason) {
				t.Fatalf("reason %q, want one containing %q", p.Reload(), c.reason)
			}
			if strings.ContainsAny(p.Reload(), "\n\r\x00\x0b\x0c") {
				t.Fatalf("the reason shows a control character: %q", p.Reload())
			}
			for _, line := range p.Commands() {
				if err := checkLine(line); err != nil {
					t.Fatalf("the plan holds %v", err)
				}
			}
			if p.Changes() != 0 {
				t.Fatalf("%d changes planned with a bad value: %q", p.Changes(), p.Commands())
			}
		})
	}
}

// TestBadLineNeverSent: the Updater refuses to send a command line with a control character
// whatever the plan holds.
func TestBadLineNeverSent(t *testing.T) {
	ctx := context.Background()
	fc := &fakeClient{}
	u := track(New(Options{Client: fc, SSLDir: ssl}))
	if err := u.batch(ctx, []command{{line: "set weight be/a 1", silent: true}, {line: "set weight be/" + evil, silent: true}}, nil); err == nil {
		t.Fatal("batch sent a line with a line break")
	}
	if err := u.run(ctx, []command{{line: "set ssl cert /x/" + evil + " <<", payload: "A"}}); err == nil {
		t.Fatal("run sent a line with a line break")
	}
	if err := u.run(ctx, []command{{line: "set ssl cert /x/a.pem <<", payload: "A\n\nshow info"}}); err == nil {
		t.Fatal("run sent a payload with an empty line")
	}
	if len(fc.sent) != 0 {
		t.Fatalf("sent %q", fc.sent)
	}
	// The last check of a plan catches a value the checks of each change would have missed.
	for _, st := range []step{
		{what: "x", cmds: []command{{line: "del server be/" + evil}}},
		{what: "x", cmds: []command{{line: "set ssl cert /x/a.pem <<", payload: "A\x00"}}},
		{what: "x", cmds: []command{{line: "commit ssl cert /x/a.pem", abort: "abort ssl cert /x/a\r.pem"}}},
		{what: "x", cmds: []command{{line: "set weight be/a  1"}}},
	} {
		if err := checkSteps([]step{st}); err == nil {
			t.Errorf("checkSteps accepted %q", st.cmds[0].line)
		}
	}
}

// recorder is a Unix socket that records every byte a client writes, one string per
// connection, and answers like HAProxy would (Socket half-closes after writing).
type recorder struct {
	mu    sync.Mutex
	conns []string
}

func (r *recorder) serve(t *testing.T) string {
	path := filepath.Join(haproxytest.ShortTempDir(t), "cli.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if first, _ := br.Peek(7); string(first) == "prompt\n" {
					r.interactive(c, br)
					return
				}
				b, _ := io.ReadAll(br)
				r.record(string(b))
				var out strings.Builder
				for _, cmd := range strings.Split(strings.SplitN(string(b), "\n", 2)[0], "; ") {
					out.WriteString(success(cmd))
				}
				io.WriteString(c, out.String())
			}()
		}
	}()
	return path
}

func (r *recorder) record(exchange string) {
	r.mu.Lock()
	r.conns = append(r.conns, exchange)
	r.mu.Unlock()
}

// interactive answers a session (cli.Session) as the master socket does, and records each of
// its commands as the exchange it would be on a connection of its own: the command line, and
// a payload's lines up to the empty line that ends it.
func (r *recorder) interactive(c net.Conn, br *bufio.Reader) {
	br.Discard(len("prompt\n"))
	io.WriteString(c, "master> ")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		exchange := line
		for strings.HasSuffix(line, "<<\n") {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			exchange += l
			if l == "\n" {
				break
			}
		}
		r.record(exchange)
		io.WriteString(c, success(strings.TrimSuffix(line, "\n"))+"\nmaster> ")
	}
}

// TestIssuePayloadNeverReachesTheSocket: the issue's payload, in every value of a runtime
// change that can carry it, with a real Socket client: every exchange written to the socket is
// one command line of one-word values (a certificate's payload after "<<" apart, which ends at
// its own empty line), and the change goes to a reload instead.
func TestIssuePayloadNeverReachesTheSocket(t *testing.T) {
	rec := &recorder{}
	path := rec.serve(t)
	u := track(New(Options{Client: &Socket{Path: path}, Prefix: "@1 ", SSLDir: ssl}))
	pem := []byte("-----BEGIN X-----\nAAAA\n-----END X-----\n")
	base := cfg([]string{"DIR"}, "a 10.0.0.1:80 check")
	certs := map[string][]byte{"a": pem}
	u.Reloaded(u.Plan(base, certs, nil))
	// The payload's line break and spaces as HAProxy's configuration parser would keep them
	// inside one word (a vertical tab, a form feed, NUL, NEL, U+2028), in each value of a
	// server; and as it is, in a certificate name (below).
	var renderings [][]byte
	for _, nl := range []string{"\v", "\f", "\x00", "\u0085", "\u2028"} {
		w := strings.NewReplacer("\n", nl, " ", nl).Replace(evil)
		renderings = append(renderings,
			cfg([]string{"DIR"}, "a 10.0.0.1:"+w+" check"),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:"+w+" check"),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b"+w+" 10.0.0.2:80 check"),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check weight "+w),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check inter "+w),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check sni "+w),
			cfg([]string{"DIR"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80 check agent-send "+w))
	}
	ctx := context.Background()
	for i, r := range renderings {
		u.Reloaded(u.Plan(base, certs, nil))
		p := u.Plan(r, certs, nil)
		if p.Reload() == "" {
			t.Errorf("rendering %d: no reload asked, commands %q", i, p.Commands())
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Errorf("rendering %d: %v", i, err)
		}
	}
	for _, name := range []string{evil, "x\r\nshow info", "x\x00"} {
		u.Reloaded(u.Plan(base, certs, nil))
		p := u.Plan(base, map[string][]byte{"a": pem, name: pem}, nil)
		if p.Reload() == "" {
			t.Errorf("certificate %q: no reload asked, commands %q", name, p.Commands())
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Errorf("certificate %q: %v", name, err)
		}
	}
	// A good change still goes through, on the same socket.
	u.Reloaded(u.Plan(base, certs, nil))
	if err := u.Apply(ctx, u.Plan(cfg([]string{"DIR"}, "a 10.0.0.2:80 check"), map[string][]byte{"a": pem, "b": pem}, nil)); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	sawAddr, sawCert := false, false
	for _, conn := range rec.conns {
		line, rest, _ := strings.Cut(conn, "\n")
		if err := oneLine(line); err != nil {
			t.Errorf("written: %v", err)
		}
		for _, cmd := range strings.Split(line, "; ") {
			if err := checkLine(strings.TrimPrefix(cmd, "@1 ")); err != nil {
				t.Errorf("written: %v", err)
			}
		}
		switch {
		case strings.HasSuffix(line, " <<"):
			sawCert = true
			// The payload: lines of the PEM, then the empty line that ends it, then nothing.
			body, ok := strings.CutSuffix(rest, "\n\n")
			if !ok || strings.Contains(body, "\n\n") || body != "-----BEGIN X-----\nAAAA\n-----END X-----" {
				t.Errorf("payload written %q", rest)
			}
		case rest != "":
			t.Errorf("after the command line %q: %q written", line, rest)
		}
		if strings.Contains(line, "addr 10.0.0.2 port 80") {
			sawAddr = true
		}
		if strings.Contains(conn, "evil") || strings.Contains(conn, "6.6.6.6") {
			t.Errorf("the payload reached the socket: %q", conn)
		}
	}
	if !sawAddr || !sawCert {
		t.Fatalf("the good change was not sent (address %v, certificate %v): %q", sawAddr, sawCert, rec.conns)
	}
}
