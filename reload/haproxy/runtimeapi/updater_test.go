package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// fakeClient answers commands from a function (default: the success answer of each command)
// and records them.
type fakeClient struct {
	mu        sync.Mutex
	sent      []string
	exchanges int
	answer    func(cmd string) (string, error)
}

func (f *fakeClient) Command(_ context.Context, line string) (string, error) {
	cmds := []string{line}
	if !strings.Contains(line, "\n") {
		cmds = strings.Split(line, "; ") // several commands in one exchange
	}
	f.mu.Lock()
	f.sent = append(f.sent, cmds...)
	f.exchanges++
	answer := f.answer
	f.mu.Unlock()
	var out strings.Builder
	for _, cmd := range cmds {
		if answer != nil {
			a, err := answer(cmd)
			if err != nil {
				return "", err
			}
			if a == noAnswer {
				continue
			}
			if a != "" {
				out.WriteString(a)
				continue
			}
		}
		out.WriteString(success(cmd))
	}
	return out.String(), nil
}

// noAnswer, from an answer function, is no answer at all (not the command's success).
const noAnswer = "\x00"

func success(cmd string) string {
	cmd = strings.TrimPrefix(cmd, "@1 ")
	switch {
	case cmd == "show info":
		return "Name: HAProxy\nPid: 1234\nUptime_sec: 5\n"
	case strings.HasPrefix(cmd, "add server"):
		return "New server registered.\n\n"
	case strings.HasPrefix(cmd, "del server"):
		return "Server deleted.\n"
	case strings.HasPrefix(cmd, "set server") && strings.Contains(cmd, " addr "):
		return "IP changed from 'x' to 'y', port changed from '1' to '2' by 'stats socket command'\n\n"
	case strings.HasPrefix(cmd, "set ssl cert"):
		return "Transaction created for certificate x!\n\n"
	case strings.HasPrefix(cmd, "commit ssl cert"), strings.HasPrefix(cmd, "add ssl crt-list"):
		return "Committing x\nSuccess!\n\n"
	case strings.HasPrefix(cmd, "new ssl cert"):
		return "New empty certificate store 'x'!\n\n"
	case cmd == "show map":
		return showList(mapsDir+"/hosts.map", mapsDir+"/paths.map")
	case cmd == "show acl":
		return showList()
	case strings.HasPrefix(cmd, "prepare map"):
		return "New version created: 7\n\n"
	}
	return "\n"
}

// commands are the commands sent, show info left out.
func (f *fakeClient) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.sent {
		if !strings.HasSuffix(c, "show info") {
			out = append(out, c)
		}
	}
	return out
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	base := cfg([]string{"a.pem"}, "a 10.0.0.1:80 check")
	certs := map[string][]byte{"a": []byte("PEM-A")}

	t.Run("sends the commands with the prefix and the payload, then knows the new state", func(t *testing.T) {
		fc := &fakeClient{}
		u := track(New(Options{Client: fc, Prefix: "@1 ", SSLDir: ssl}))
		u.Reloaded(u.Plan(base, certs, nil))
		next := cfg([]string{"a.pem"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80")
		nextCerts := map[string][]byte{"a": []byte("PEM-B")}
		p := u.Plan(next, nextCerts, nil)
		if err := u.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"@1 add server be_web/b 10.0.0.2:80 inter 2s fall 3 rise 2",
			"@1 enable server be_web/b",
			"@1 set ssl cert " + ssl + "/a.pem <<\nPEM-B\n",
			"@1 commit ssl cert " + ssl + "/a.pem",
		}
		if got := fc.commands(); !reflect.DeepEqual(got, want) {
			t.Fatalf("sent %q\nwant %q", got, want)
		}
		if p := u.Plan(next, nextCerts, nil); p.Reload() != "" || p.Changes() != 0 {
			t.Fatalf("after Apply: reason %q, %d changes", p.Reload(), p.Changes())
		}
	})

	t.Run("a failed command leaves the state unknown", func(t *testing.T) {
		fc := &fakeClient{answer: func(cmd string) (string, error) {
			if strings.Contains(cmd, "add server") {
				return "'cookie' option is not accepted for dynamic server\n", nil
			}
			return "", nil
		}}
		u := track(New(Options{Client: fc, SSLDir: ssl}))
		u.Reloaded(u.Plan(base, certs, nil))
		p := u.Plan(cfg([]string{"a.pem"}, "a 10.0.0.1:80 check", "b 10.0.0.2:80"), certs, nil)
		err := u.Apply(ctx, p)
		if err == nil || !strings.Contains(err.Error(), "not accepted") {
			t.Fatalf("error %v", err)
		}
		if p := u.Plan(base, certs, nil); !strings.Contains(p.Reload(), "not known") {
			t.Fatalf("after a failure the next plan must reload, reason %q", p.Reload())
		}
	})

	t.Run("a failed certificate update is aborted", func(t *testing.T) {
		fc := &fakeClient{answer: func(cmd string) (string, error) {
			if strings.HasPrefix(cmd, "set ssl cert") {
				return "unable to load certificate\nCan't load the payload\n", nil
			}
			return "", nil
		}}
		u := track(New(Options{Client: fc, SSLDir: ssl}))
		u.Reloaded(u.Plan(base, certs, nil))
		if err := u.Apply(ctx, u.Plan(base, map[string][]byte{"a": []byte("bad")}, nil)); err == nil {
			t.Fatal("no error")
		}
		got := fc.commands()
		if got[len(got)-1] != "abort ssl cert "+ssl+"/a.pem" {
			t.Fatalf("last command %q, want the abort", got[len(got)-1])
		}
	})

	t.Run("a connection error", func(t *testing.T) {
		fc := &fakeClient{answer: func(string) (string, error) { return "", errors.New("connection refused") }}
		u := track(New(Options{Client: fc, SSLDir: ssl}))
		u.Reloaded(u.Plan(base, certs, nil))
		if err := u.Apply(ctx, u.Plan(cfg(nil, "b 10.0.0.2:80"), certs, nil)); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("error %v", err)
		}
	})

	t.Run("a stale plan is refused", func(t *testing.T) {
		u := track(New(Options{Client: &fakeClient{}, SSLDir: ssl}))
		u.Reloaded(u.Plan(base, certs, nil))
		p := u.Plan(cfg(nil, "b 10.0.0.2:80"), certs, nil)
		u.Reloaded(u.Plan(base, certs, nil))
		if err := u.Apply(ctx, p); err == nil {
			t.Fatal("stale plan applied")
		}
	})
}

// TestApplyBusyServer: a removed server that still has connections stays in
// maintenance; the next update deletes it again, and a rendering that brings it back enables it
// instead of adding it.
func TestApplyBusyServer(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	busy := true
	fc := &fakeClient{answer: func(cmd string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if busy && strings.HasPrefix(cmd, "del server") {
			return "Server still has connections attached to it, cannot remove it.\n", nil
		}
		return "", nil
	}}
	u := track(New(Options{Client: fc, SSLDir: ssl}))
	two := cfg(nil, "a 10.0.0.1:80", "b 10.0.0.2:80")
	one := cfg(nil, "a 10.0.0.1:80")
	u.Reloaded(u.Plan(two, nil, nil))
	if err := u.Apply(ctx, u.Plan(one, nil, nil)); err != nil {
		t.Fatal(err)
	}
	t.Run("the next update deletes it again, failures are not errors", func(t *testing.T) {
		p := u.Plan(one, nil, nil)
		if p.Reload() != "" || p.Changes() != 0 || !reflect.DeepEqual(p.Commands(), []string{"del server be_web/b"}) {
			t.Fatalf("reason %q, changes %d, commands %q", p.Reload(), p.Changes(), p.Commands())
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("brought back: enabled with its new address", func(t *testing.T) {
		p := u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.3:80"), nil, nil)
		want := []string{"set server be_web/b addr 10.0.0.3 port 80", "set server be_web/b state ready"}
		if !reflect.DeepEqual(p.Commands(), want) {
			t.Fatalf("commands %q, want %q", p.Commands(), want)
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		if p := u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.3:80"), nil, nil); len(p.Commands()) != 0 {
			t.Fatalf("still a zombie: %q", p.Commands())
		}
	})
	t.Run("Tidy deletes it once its connections are gone", func(t *testing.T) {
		if err := u.Apply(ctx, u.Plan(one, nil, nil)); err != nil {
			t.Fatal(err)
		}
		if left := u.Tidy(ctx); left != 1 {
			t.Fatalf("%d left, want 1 (still busy)", left)
		}
		mu.Lock()
		busy = false
		mu.Unlock()
		if left := u.Tidy(ctx); left != 0 {
			t.Fatalf("%d left", left)
		}
		if p := u.Plan(one, nil, nil); len(p.Commands()) != 0 {
			t.Fatalf("commands after Tidy: %q", p.Commands())
		}
		if u.Tidy(ctx) != 0 {
			t.Fatal("Tidy with nothing to do")
		}
	})
	t.Run("deleted once its connections are gone", func(t *testing.T) {
		mu.Lock()
		busy = true
		mu.Unlock()
		if err := u.Apply(ctx, u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.3:80"), nil, nil)); err != nil {
			t.Fatal(err)
		}
		if err := u.Apply(ctx, u.Plan(one, nil, nil)); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		busy = false
		mu.Unlock()
		if err := u.Apply(ctx, u.Plan(one, nil, nil)); err != nil {
			t.Fatal(err)
		}
		if p := u.Plan(one, nil, nil); len(p.Commands()) != 0 {
			t.Fatalf("commands after the delete: %q", p.Commands())
		}
	})
}

// TestBatch: server commands travel several per exchange, in chunks of at most maxBatch
// bytes; each answer line is checked in order.
func TestBatch(t *testing.T) {
	ctx := context.Background()
	var many []string
	for i := 0; i < 200; i++ {
		many = append(many, fmt.Sprintf("s%03d 10.0.%d.%d:8080 check", i, i/250, i%250+1))
	}
	t.Run("200 servers added and removed in a few exchanges", func(t *testing.T) {
		fc := &fakeClient{}
		u := track(New(Options{Client: fc, Prefix: "@1 ", SSLDir: ssl, Logger: slog.New(slog.DiscardHandler)}))
		u.Reloaded(u.Plan(cfg(nil), nil, nil))
		if err := u.Apply(ctx, u.Plan(cfg(nil, many...), nil, nil)); err != nil {
			t.Fatal(err)
		}
		if n := len(fc.commands()); n != 600 || fc.exchanges > 600*90/maxBatch+2 {
			t.Fatalf("%d commands in %d exchanges", n, fc.exchanges)
		}
		fc.exchanges = 0
		if err := u.Apply(ctx, u.Plan(cfg(nil), nil, nil)); err != nil {
			t.Fatal(err)
		}
		if fc.exchanges > 10 {
			t.Fatalf("removals took %d exchanges", fc.exchanges)
		}
	})
	t.Run("a silent command that complains is an error", func(t *testing.T) {
		fc := &fakeClient{answer: func(cmd string) (string, error) {
			if cmd == "enable health be_web/s001" {
				return "No such server.\n", nil
			}
			return "", nil
		}}
		u := track(New(Options{Client: fc, SSLDir: ssl}))
		u.Reloaded(u.Plan(cfg(nil), nil, nil))
		err := u.Apply(ctx, u.Plan(cfg(nil, many[:3]...), nil, nil))
		if err == nil || !strings.Contains(err.Error(), "No such server") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("each delete has its own outcome", func(t *testing.T) {
		fc := &fakeClient{answer: func(cmd string) (string, error) {
			if cmd == "del server be_web/s001" {
				return "Server still has connections attached to it, cannot remove it.\n", nil
			}
			return "", nil
		}}
		u := track(New(Options{Client: fc, SSLDir: ssl, Logger: slog.New(slog.DiscardHandler)}))
		u.Reloaded(u.Plan(cfg(nil, many[:3]...), nil, nil))
		if err := u.Apply(ctx, u.Plan(cfg(nil), nil, nil)); err != nil {
			t.Fatal(err)
		}
		// Only s001 is left to delete at the next update.
		if got := u.Plan(cfg(nil), nil, nil).Commands(); !reflect.DeepEqual(got, []string{"del server be_web/s001"}) {
			t.Fatalf("next update sends %q", got)
		}
	})
}

// TestApplyNoticesAnotherWorker: when HAProxy was reloaded or restarted without the sidecar,
// its worker has another pid, and what it runs is what was on disk then: the update fails (the
// pipeline reloads).
func TestApplyNoticesAnotherWorker(t *testing.T) {
	ctx := context.Background()
	pid := "1234"
	fc := &fakeClient{answer: func(cmd string) (string, error) {
		if cmd == "show info" {
			return "Pid: " + pid + "\n", nil
		}
		return "", nil
	}}
	u := track(New(Options{Client: fc, SSLDir: ssl}))
	u.Reloaded(u.Plan(cfg(nil, "a 10.0.0.1:80"), nil, nil))
	if err := u.Apply(ctx, u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.2:80"), nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := u.Apply(ctx, u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.2:80", "c 10.0.0.3:80"), nil, nil)); err != nil {
		t.Fatal(err)
	}
	pid = "999"
	err := u.Apply(ctx, u.Plan(cfg(nil, "a 10.0.0.1:80"), nil, nil))
	if err == nil || !strings.Contains(err.Error(), "worker changed") {
		t.Fatalf("error %v", err)
	}
	if p := u.Plan(cfg(nil, "a 10.0.0.1:80"), nil, nil); !strings.Contains(p.Reload(), "not known") {
		t.Fatalf("reason %q", p.Reload())
	}
	// After the sidecar's own reload, the new worker is the one.
	u.Reloaded(u.Plan(cfg(nil, "a 10.0.0.1:80"), nil, nil))
	if err := u.Apply(ctx, u.Plan(cfg(nil, "a 10.0.0.1:80", "b 10.0.0.2:80"), nil, nil)); err != nil {
		t.Fatal(err)
	}
}
