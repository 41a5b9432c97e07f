// Package cli is the one client of HAProxy's CLI sockets: the master CLI socket
// (`haproxy -W -S PATH,level,admin`) and stats sockets (`stats socket PATH level admin`). The
// reload, the runtime API updates and the tests all talk to HAProxy through it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultTimeout bounds one command when Client.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// ErrNotRunning means no HAProxy listens on the socket: the socket file is absent or refuses
// connections (also for a moment while a master re-executes itself on reload).
var ErrNotRunning = errors.New("haproxy is not running")

// Client sends commands to one CLI socket, one connection per command (Command), or many on one
// connection (Session).
type Client struct {
	Path string
	// Timeout bounds one command, the answer included (default DefaultTimeout); the context
	// given to Command may bound it further.
	Timeout time.Duration

	// noLoadStatus: the master answered `_loadstatus` with "Unknown command" (2.6).
	noLoadStatus atomic.Bool
}

// Command sends one command (a line, or a line and its payload) and returns the whole answer:
// it half-closes the connection after sending, because HAProxy answers and then waits for the
// client to close, and reads until HAProxy closes the connection. Through the master socket,
// prefix the command with "@1 " to reach the current worker.
//
// A connection that cannot be made because the socket is absent or refused wraps
// ErrNotRunning. A connection HAProxy drops before answering wraps syscall.ECONNRESET or
// syscall.EPIPE (the 2.6 master does so on reload). Errors name only the first line of the
// command: a payload may be a private key.
//
// A command for a worker through the master socket ("@1 ...", "@!<pid> ...") is sent once no
// worker is starting: from 3.1 on the master forks a new worker before it has loaded anything,
// and HAProxy 3.2.26 can leave an "@1" command sent while its first worker starts unanswered
// until the client gives up. The master's load status (`_loadstatus`, what it answers a reload
// with) answers once no worker is starting; 3.0 answers it at once, 2.6 does not know it.
func (c *Client) Command(ctx context.Context, cmd string) (string, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if forWorker(cmd) && !c.noLoadStatus.Load() {
		out, err := c.exchange(ctx, "_loadstatus")
		if err != nil {
			return "", fmt.Errorf("wait for no starting worker before %q: %w", FirstLine(cmd), err)
		}
		if strings.HasPrefix(out, "Unknown command") {
			c.noLoadStatus.Store(true)
		}
	}
	return c.exchange(ctx, cmd)
}

// forWorker: cmd is for a worker, through the master socket ("@1 ...", "@!<pid> ...").
func forWorker(cmd string) bool {
	return strings.HasPrefix(cmd, "@") && !strings.HasPrefix(cmd, "@master")
}

// bound is ctx bounded by the client's timeout.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// dial connects to the socket.
func (c *Client) dial(ctx context.Context) (*net.UnixConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect to %s: %w (%w)", c.Path, ErrNotRunning, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", c.Path, ctxErr(ctx, err))
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("%s is not a unix socket", c.Path)
	}
	return uc, nil
}

// exchange sends one command on a new connection and reads the answer, bounded by ctx.
func (c *Client) exchange(ctx context.Context, cmd string) (string, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", c.ioErr(ctx, cmd, "send", err)
	}
	if err := conn.CloseWrite(); err != nil {
		return "", c.ioErr(ctx, cmd, "half-close after", err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return string(out), c.ioErr(ctx, cmd, "read answer to", err)
	}
	return string(out), nil
}

func (c *Client) ioErr(ctx context.Context, cmd, what string, err error) error {
	return fmt.Errorf("%s %q on %s: %w", what, FirstLine(cmd), c.Path, ctxErr(ctx, err))
}

// ctxErr is the context's error when the context ended: the connection's deadline (the
// context's) may fire before the context says so.
func ctxErr(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// Dropped reports whether err means HAProxy closed the connection before answering.
func Dropped(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// FirstLine is the first line of s, with " ..." when more follows: what an error may quote of
// a command or an answer.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
