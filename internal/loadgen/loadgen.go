// Package loadgen sends bounded keep-alive HTTP load on loopback and counts every request that
// does not get a 200. It does not retry: Go's http.Transport silently retries some requests on a
// reused connection, which would hide exactly the failures reload tests measure.
package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxErrors bounds how many error messages are kept.
const maxErrors = 10

// KeepAlive is a running load: one raw HTTP/1.1 connection per worker, reconnecting only when
// the server says it closes (as any HTTP client would) or a request fails.
type KeepAlive struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
	closeEach  bool // one new connection per request (Connection: close)
}

// Start sends GET / with Host: host to addr over conns connections until Stop.
func Start(addr, host string, conns int) *KeepAlive {
	return start(&KeepAlive{stop: make(chan struct{})}, addr, host, conns)
}

// StartNewConnections is Start with one new connection per request: each request says
// Connection: close, and the next one dials again. Nothing outlives a request, so a request
// meets whatever HAProxy (and its backend) is at that moment.
func StartNewConnections(addr, host string, conns int) *KeepAlive {
	return start(&KeepAlive{stop: make(chan struct{}), closeEach: true}, addr, host, conns)
}

func start(l *KeepAlive, addr, host string, conns int) *KeepAlive {
	for i := 0; i < conns; i++ {
		l.wg.Add(1)
		go l.worker(addr, host)
	}
	return l
}

func (l *KeepAlive) worker(addr, host string) {
	defer l.wg.Done()
	var c net.Conn
	var r *bufio.Reader
	drop := func() {
		if c != nil {
			c.Close()
			c = nil
		}
	}
	defer drop()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
				l.fail("dial: " + err.Error())
				c = nil
				continue
			}
			r = bufio.NewReader(c)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		hdr := ""
		if l.closeEach {
			hdr = "Connection: close\r\n"
		}
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, hdr); err != nil {
			l.fail("write: " + err.Error())
			drop()
			continue
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			l.fail("read: " + err.Error())
			drop()
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			l.fail(resp.Status)
		} else {
			l.ok.Add(1)
		}
		if resp.Close || l.closeEach {
			drop()
		}
	}
}

func (l *KeepAlive) fail(msg string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < maxErrors {
		l.errs = append(l.errs, msg)
	}
	l.mu.Unlock()
}

// Stop ends the load and waits for its connections to close.
func (l *KeepAlive) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// OK and Failed count the requests answered 200 and the others.
func (l *KeepAlive) OK() int64     { return l.ok.Load() }
func (l *KeepAlive) Failed() int64 { return l.failed.Load() }

// Errors returns the first errors seen.
func (l *KeepAlive) Errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}
