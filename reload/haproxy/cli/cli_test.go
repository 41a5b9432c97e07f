package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/fakesocket"
)

func TestCommandSendsAndReadsUntilClose(t *testing.T) {
	path := fakesocket.Serve(t, func(c net.Conn, req string) {
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
	path := fakesocket.Serve(t, func(c net.Conn, req string) { <-release })
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

// A command for a worker through the master waits until no worker is starting; master-level
// commands do not; a master that does not know `_loadstatus` (2.6) is not asked again.
func TestWorkerCommandWaitsForAStartingWorker(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var asked []string
	path := fakesocket.Serve(t, func(c net.Conn, req string) {
		req = strings.TrimSpace(req)
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		if req == "_loadstatus" {
			<-release // a worker is starting
			io.WriteString(c, "Success=1\n")
			return
		}
		io.WriteString(c, "answer to "+req+"\n")
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c := &Client{Path: path}
	if out, err := c.Command(context.Background(), "show proc"); err != nil || out != "answer to show proc\n" {
		t.Fatalf("show proc while a worker starts = %q, %v", out, err)
	}
	done := make(chan string, 1)
	go func() {
		out, _ := c.Command(context.Background(), "@1 show info")
		done <- out
	}()
	select {
	case out := <-done:
		t.Fatalf("@1 show info answered %q while a worker starts", out)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case out := <-done:
		if out != "answer to @1 show info\n" {
			t.Fatalf("@1 show info = %q", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("@1 show info still waits after the worker started")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"show proc", "_loadstatus", "@1 show info"}; !slices.Equal(asked, want) {
		t.Fatalf("commands sent %q, want %q", asked, want)
	}
}

func TestWorkerCommandOn26(t *testing.T) {
	var mu sync.Mutex
	loadStatus := 0
	path := fakesocket.Serve(t, func(c net.Conn, req string) {
		if strings.TrimSpace(req) == "_loadstatus" {
			mu.Lock()
			loadStatus++
			mu.Unlock()
			io.WriteString(c, "Unknown command, but maybe one of the following ones is a better match:\n")
			return
		}
		io.WriteString(c, "ok\n")
	})
	c := &Client{Path: path}
	for range 3 {
		if out, err := c.Command(context.Background(), "@1 show info"); err != nil || out != "ok\n" {
			t.Fatalf("@1 show info = %q, %v", out, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if loadStatus != 1 {
		t.Fatalf("_loadstatus asked %d times of a master that does not know it, want once", loadStatus)
	}
}
