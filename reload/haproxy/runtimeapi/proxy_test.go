package runtimeapi

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// cliProxy stands between an Updater and HAProxy's CLI socket: it counts the connections, and
// calls before with each line the client sends (command lines and payload lines) before it
// forwards it, whether the line comes on a connection of its own or in a session.
type cliProxy struct {
	path  string
	conns atomic.Int32
}

func newCLIProxy(t testing.TB, target string, before func(line string)) *cliProxy {
	t.Helper()
	p := &cliProxy{path: filepath.Join(haproxytest.ShortTempDir(t), "proxy.sock")}
	l, err := net.Listen("unix", p.path)
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
			p.conns.Add(1)
			wg.Go(func() { p.forward(c.(*net.UnixConn), target, before) })
		}
	})
	return p
}

func (p *cliProxy) forward(c *net.UnixConn, target string, before func(string)) {
	defer c.Close()
	up, err := net.Dial("unix", target)
	if err != nil {
		return
	}
	defer up.Close()
	back := make(chan struct{})
	go func() {
		io.Copy(c, up)
		c.Close() // HAProxy closed: so does the proxy
		close(back)
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			if before != nil {
				before(line)
			}
			if _, werr := io.WriteString(up, line); werr != nil {
				break
			}
		}
		if err != nil {
			up.(*net.UnixConn).CloseWrite() // the client half-closed: so does the proxy
			break
		}
	}
	<-back
}
