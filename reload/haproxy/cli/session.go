package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
)

// Session is one connection to a CLI socket in interactive mode (`prompt`), on which commands
// are sent one after the other: where Command opens a connection per command (and, through
// the master socket, asks the master's load status before each "@" command), a session opens
// one and asks once. A change of many commands (a map swapped in many payloads) saves a
// connection, and the master its relay to the worker's CLI, per command.
//
// In interactive mode HAProxy ends each answer with a prompt ("master> " on the master socket,
// "> " on a stats socket, after a line break) and echoes "+ " for each payload line (the
// master always; stats sockets before 3.2); a payload ends at an empty line. Measured the same
// on 2.6, 3.0, 3.2 and 3.4, through the master socket ("@1 ...") and on stats sockets. Answers
// are those Command returns for the same commands.
//
// A Session is not safe for concurrent use. After an error (connection, timeout, an answer
// with no prompt) it is closed and every later command fails: open another, or use Command.
type Session struct {
	c    *Client
	conn *net.UnixConn
	buf  []byte // read but not yet returned
	// asked: the master's load status was asked (see Command), or need not be.
	asked bool
	err   error
}

// prompt is the prompt interactive mode ends an answer with, at the start of a line: the
// master's ("master> ", "master[ReloadFailed]> " after a failed reload, "<pid>> " after "@<pid>"
// alone, with "(x)" or "(d)" in experimental or debug mode) or a worker's ("> ").
var prompt = regexp.MustCompile(`^(?:master|[0-9]+)?(?:\[[^\]\n]*\])*(?:\([a-z]*\))?> `)

// Session connects to the socket and turns interactive mode on. Close it when done.
func (c *Client) Session(ctx context.Context) (*Session, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	s := &Session{c: c, conn: conn}
	// The answer to "prompt" is the first prompt: "master> ", or "\n> " on a stats socket.
	if _, err := s.exchange(ctx, []string{"prompt"}, true); err != nil {
		return nil, err
	}
	return s, nil
}

// Command sends one command (a line, or a line ending in "<<" and its payload, which must have
// no empty line) and returns its answer, as Client.Command does.
func (s *Session) Command(ctx context.Context, cmd string) (string, error) {
	out, err := s.Commands(ctx, []string{cmd})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// Commands sends commands without waiting for each answer (HAProxy still runs them one after
// the other, in order, and every one of them whatever the others answered, as it runs the
// commands of one line separated by ";") and returns their answers, in order.
func (s *Session) Commands(ctx context.Context, cmds []string) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	for _, cmd := range cmds {
		if err := checkInteractive(cmd); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.c.bound(ctx)
	defer cancel()
	for _, cmd := range cmds {
		if s.asked || s.c.noLoadStatus.Load() || !forWorker(cmd) {
			continue
		}
		out, err := s.exchange(ctx, []string{"_loadstatus"}, false)
		if err != nil {
			return nil, fmt.Errorf("wait for no starting worker before %q: %w", FirstLine(cmd), err)
		}
		if strings.HasPrefix(out[0], "Unknown command") {
			s.c.noLoadStatus.Store(true)
		}
		s.asked = true
	}
	return s.exchange(ctx, cmds, false)
}

// checkInteractive refuses what interactive mode would read as more than one command, and so
// answer with more than one prompt: commands separated by ";" (the master answers each with a
// prompt, a 3.2 stats socket all with one), a line break outside a payload, an empty line in a
// payload (it would end the payload, and the lines after it would run as commands).
func checkInteractive(cmd string) error {
	line, payload, multi := strings.Cut(cmd, "\n")
	switch {
	case strings.Contains(line, ";"):
		return fmt.Errorf("command %q has a ';' (several commands): send them apart", FirstLine(cmd))
	case !multi:
		return nil
	case !strings.HasSuffix(strings.TrimRight(line, " "), "<<"):
		return fmt.Errorf("command %q has a line break and no payload: not sent", FirstLine(cmd))
	}
	p := strings.TrimSuffix(payload, "\n")
	if p == "" || strings.Contains(p, "\n\n") || p[0] == '\n' || p[len(p)-1] == '\n' {
		return fmt.Errorf("the payload of %q has an empty line: not sent", FirstLine(cmd))
	}
	return nil
}

// exchange writes the commands (each ended by a line break; a payload by an empty line) while
// it reads their answers, so that neither side waits on a full socket buffer. first: the
// answer to "prompt", which is the first prompt.
func (s *Session) exchange(ctx context.Context, cmds []string, first bool) (answers []string, err error) {
	defer func() {
		if err != nil {
			s.fail(err)
		}
	}()
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.conn.SetDeadline(dl)
	}
	var b strings.Builder
	size := 0
	for _, cmd := range cmds {
		size += len(cmd) + 2
	}
	b.Grow(size) // a map's payloads are megabytes at 10,000 routes: one buffer, not a doubling series
	for _, cmd := range cmds {
		b.WriteString(cmd)
		b.WriteByte('\n')
		if strings.Contains(cmd, "\n") && !strings.HasSuffix(cmd, "\n") {
			b.WriteByte('\n')
		}
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.conn, b.String())
		wrote <- err
	}()
	answers = make([]string, 0, len(cmds))
	for len(answers) < len(cmds) {
		a, err := s.answer(first)
		if err != nil {
			s.conn.Close() // the writer, if still blocked, returns
			<-wrote
			return nil, s.c.ioErr(ctx, cmds[len(answers)], "read answer to", err)
		}
		answers = append(answers, a)
	}
	if err := <-wrote; err != nil {
		return nil, s.c.ioErr(ctx, cmds[0], "send", err)
	}
	return answers, nil
}

// answer reads up to the next prompt and returns what came before it, the payload's "+ "
// echoes left out.
func (s *Session) answer(first bool) (string, error) {
	scanned := 0
	for {
		if end, next, ok := promptAt(s.buf, scanned, first); ok {
			a := string(s.buf[:end])
			s.buf = s.buf[next:]
			for strings.HasPrefix(a, "+ ") {
				a = a[2:]
			}
			return a, nil
		}
		if i := bytes.LastIndexByte(s.buf, '\n'); i > scanned {
			scanned = i // a prompt starts after a line break seen later
		}
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, make([]byte, 4096)...)[:len(s.buf)]
		}
		n, err := s.conn.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("connection closed with no prompt after %q: %w", FirstLine(string(s.buf)), syscall.ECONNRESET)
			}
			return "", err
		}
	}
}

// promptAt finds the first prompt in buf that starts a line at or after from: end is where
// the answer before it ends (its line break included), next where the following answer
// starts. first: the answer to "prompt", whose prompt may start buf.
func promptAt(buf []byte, from int, first bool) (end, next int, ok bool) {
	if first && from == 0 {
		if m := prompt.FindIndex(buf); m != nil {
			return 0, m[1], true
		}
	}
	for i := from; i < len(buf); i++ {
		if buf[i] != '\n' {
			continue
		}
		if m := prompt.FindIndex(buf[i+1:]); m != nil {
			return i + 1, i + 1 + m[1], true
		}
	}
	return 0, 0, false
}

func (s *Session) fail(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("CLI session on %s ended: %w", s.c.Path, err)
	}
	s.conn.Close()
}

// Close ends the session.
func (s *Session) Close() error {
	if s.err == nil {
		s.err = fmt.Errorf("CLI session on %s closed", s.c.Path)
	}
	return s.conn.Close()
}
