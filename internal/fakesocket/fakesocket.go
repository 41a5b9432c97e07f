// Package fakesocket serves a function on a unix socket the way HAProxy's CLI sockets talk: a
// request is what the client sends until it half-closes, the answer what is written before
// the connection closes. It is for tests of the CLI client and what uses it (haproxy/cli
// cannot use internal/haproxytest, which imports it).
package fakesocket

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Serve listens on a new unix socket (a short path: socket paths are limited to about 100
// bytes) and calls serve for each connection, each on its own goroutine so that a held answer
// does not block the others; the connection is closed when serve returns. The listener stops,
// and every serve has returned, when the test ends. It returns the socket's path.
func Serve(t testing.TB, serve func(c net.Conn, request string)) string {
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
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				b, _ := io.ReadAll(bufio.NewReader(c)) // until the client half-closes
				serve(c, string(b))
			})
		}
	})
	return path
}
