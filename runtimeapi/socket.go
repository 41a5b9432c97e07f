package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Socket talks to an HAProxy CLI socket: a stats socket at level admin
// (`stats socket PATH level admin`), or the master CLI socket (`haproxy -W -S PATH,level,admin`),
// in which case commands need the "@1 " prefix to reach the current worker (see Updater).
type Socket struct {
	Path string
	// Timeout bounds one command (default 10s).
	Timeout time.Duration
}

// Command sends one command (with its payload, if any) and returns the whole answer. It
// half-closes the connection after sending: HAProxy answers, then waits for the client to close.
func (s *Socket) Command(ctx context.Context, cmd string) (string, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.Path)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", s.Path, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", s.ioErr(ctx, cmd, "send", err)
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return "", errors.New("not a unix socket")
	}
	if err := uc.CloseWrite(); err != nil {
		return "", s.ioErr(ctx, cmd, "half-close after", err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return string(out), s.ioErr(ctx, cmd, "read answer to", err)
	}
	return string(out), nil
}

func (s *Socket) ioErr(ctx context.Context, cmd, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	return fmt.Errorf("%s %q on %s: %w", what, firstLine(cmd), s.Path, err)
}
