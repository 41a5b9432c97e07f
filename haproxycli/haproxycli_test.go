package haproxycli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSocket serves one answer function on a unix socket; each connection reads what the client
// sends until it half-closes, as HAProxy does.
func fakeSocket(t *testing.T, serve func(c net.Conn, request string)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cli")
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				b, _ := io.ReadAll(bufio.NewReader(c)) // until the client half-closes
				serve(c, string(b))
			}()
		}
	}()
	return path
}

func TestCommandSendsAndReadsUntilClose(t *testing.T) {
	path := fakeSocket(t, func(c net.Conn, req string) {
		// An answer in two parts, the second after a pause: the client reads until the close.
		io.WriteString(c, "got "+strings.TrimSpace(req)+"\n")
		time.Sleep(50 * time.Millisecond)
		io.WriteString(c, "done\n")
	})
	out, err := (&Client{Path: path}).Command(context.Background(), "show info")
	if err != nil || out != "got show info\ndone\n" {
		t.Fatalf("Command = %q, %v", out, err)
	}
}

func TestCommandNotRunning(t *testing.T) {
	c := &Client{Path: filepath.Join(t.TempDir(), "absent.sock")}
	if _, err := c.Command(context.Background(), "show proc"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("absent socket: %v, want ErrNotRunning", err)
	}
	dir, _ := os.MkdirTemp("", "cli")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := (&Client{Path: path}).Command(context.Background(), "show proc"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("stale socket: %v, want ErrNotRunning", err)
	}
}

func TestCommandTimeoutNamesOnlyTheFirstLine(t *testing.T) {
	release := make(chan struct{})
	path := fakeSocket(t, func(c net.Conn, req string) { <-release })
	t.Cleanup(func() { close(release) }) // before fakeSocket's cleanup waits for its handlers
	start := time.Now()
	_, err := (&Client{Path: path, Timeout: 100 * time.Millisecond}).Command(context.Background(),
		"set ssl cert /x.pem <<\n-----BEGIN PRIVATE KEY-----\nsecret\n")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Command = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Command took %v with a 100ms timeout", d)
	}
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "set ssl cert /x.pem <<") {
		t.Fatalf("error %q: want the first line of the command and nothing of its payload", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := (&Client{Path: path}).Command(ctx, "show proc"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Command = %v", err)
	}
}

// The 2.6 master closes the connection of a `reload` without reading or answering it.
func TestDropped(t *testing.T) {
	dir, _ := os.MkdirTemp("", "cli")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the command arrives, unread
			c.Close()
		}
	}()
	_, err = (&Client{Path: path}).Command(context.Background(), "reload")
	if !Dropped(err) {
		t.Fatalf("a connection closed unread: %v, want Dropped", err)
	}
	if Dropped(errors.New("other")) || Dropped(nil) {
		t.Fatal("Dropped of an unrelated error")
	}
}
