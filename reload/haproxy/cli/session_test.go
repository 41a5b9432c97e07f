package cli

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// interactive serves one connection the way HAProxy's CLI does in interactive mode: each command
// (a line, and its payload up to an empty line) is answered by answer, one byte per write, then
// followed by a line break and the prompt; "+ " is echoed per payload line, as the master does.
// It returns the socket's path and the commands received so far.
func interactive(t *testing.T, prompt string, answer func(cmd string) (string, bool)) (string, func() []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		write := func(s string) {
			for i := range len(s) {
				c.Write([]byte{s[i]})
			}
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.TrimSuffix(line, "\n")
			echo := ""
			if strings.HasSuffix(cmd, "<<") {
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					echo += "+ "
					if l == "\n" {
						break
					}
					cmd += "\n" + strings.TrimSuffix(l, "\n")
				}
			}
			mu.Lock()
			got = append(got, cmd)
			mu.Unlock()
			if cmd == "prompt" {
				write(prompt)
				continue
			}
			out, keep := answer(cmd)
			write(echo + out)
			if !keep {
				return
			}
			write("\n" + prompt)
		}
	})
	return path, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func TestSessionSplitsAnswersAtPrompts(t *testing.T) {
	for _, prompt := range []string{"master> ", "master[ReloadFailed]> ", "> ", "1234(x)> "} {
		t.Run(prompt, func(t *testing.T) {
			path, got := interactive(t, prompt, func(cmd string) (string, bool) {
				switch {
				case cmd == "_loadstatus":
					return "Success=1\n--\nLoading success.\n", true
				case strings.HasPrefix(cmd, "@1 add map"):
					return "", true // then the line break before the prompt: "\n", as Command has it
				case cmd == "@1 show map":
					// Lines that look like a prompt, but not at the start of a line.
					return "# id (file) description\n0 (/x> y.map) pattern master> \n", true
				}
				return "Unknown command.\n", true
			})
			s, err := (&Client{Path: path}).Session(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			answers, err := s.Commands(context.Background(), []string{"@1 add map @1 m <<\na b\nc d", "@1 show map", "@1 nope"})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"\n", "# id (file) description\n0 (/x> y.map) pattern master> \n\n", "Unknown command.\n\n"}
			if strings.Join(answers, "|") != strings.Join(want, "|") {
				t.Fatalf("answers %q, want %q", answers, want)
			}
			// The load status was asked once, before the first "@1" command.
			if g := got(); strings.Join(g, "|") != "prompt|_loadstatus|@1 add map @1 m <<\na b\nc d|@1 show map|@1 nope" {
				t.Fatalf("received %q", g)
			}
			if a, err := s.Command(context.Background(), "@1 show map"); err != nil || !strings.HasPrefix(a, "# id") {
				t.Fatalf("next command = %q, %v", a, err)
			}
		})
	}
}

func TestSessionRefusesWhatWouldRunAsSeveralCommands(t *testing.T) {
	path, got := interactive(t, "master> ", func(string) (string, bool) { return "", true })
	s, err := (&Client{Path: path}).Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, cmd := range []string{
		"@1 show info; @1 show map",                 // two commands: two prompts from the master
		"@1 show info\n@1 show map",                 // a line break outside a payload
		"@1 add map @1 m <<\na b\n\n@1 clear map m", // an empty line ends the payload
		"@1 add map @1 m <<\n\na b",                 // the payload starts with one
		"@1 add map @1 m <<\na b\n\n",               // or ends with one
		"@1 add map @1 m <<\n",                      // or is one
	} {
		if _, err := s.Command(context.Background(), cmd); err == nil {
			t.Errorf("%q was sent", cmd)
		}
	}
	if a, err := s.Command(context.Background(), "@1 add map @1 m <<\na b\n"); err != nil {
		t.Fatalf("a payload ended by a line break: %q, %v", a, err)
	}
	if g := got(); len(g) != 3 || g[2] != "@1 add map @1 m <<\na b" {
		t.Fatalf("received %q, want only the prompt, the load status and the last command", g)
	}
}

// A connection HAProxy closes before the prompt (the 2.6 master on reload) is an error, and the
// session is done: later commands fail at once.
func TestSessionDroppedBeforeThePrompt(t *testing.T) {
	path, _ := interactive(t, "> ", func(cmd string) (string, bool) { return "half an answer", cmd != "show info" })
	s, err := (&Client{Path: path}).Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Command(context.Background(), "show info"); !errors.Is(err, syscall.ECONNRESET) || !Dropped(err) {
		t.Fatalf("answer cut short: %v, want a dropped connection", err)
	}
	if _, err := s.Command(context.Background(), "show map"); err == nil {
		t.Fatal("a command after the session failed was sent")
	}
}
