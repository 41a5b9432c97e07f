package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// keepAliveLoad sends GETs over persistent connections as fast as it can until stopped,
// counting every request that does not get a 200. It does not retry: Go's http.Transport
// silently retries some requests on a reused connection, which would hide exactly the
// failures this measures.
type keepAliveLoad struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(addr, host string, conns int) *keepAliveLoad {
	l := &keepAliveLoad{stop: make(chan struct{})}
	for i := 0; i < conns; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var c net.Conn
			var r *bufio.Reader
			for {
				select {
				case <-l.stop:
					if c != nil {
						c.Close()
					}
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
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
					l.fail("write: " + err.Error())
					c.Close()
					c = nil
					continue
				}
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					l.fail("read: " + err.Error())
					c.Close()
					c = nil
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					l.fail(resp.Status)
				} else {
					l.ok.Add(1)
				}
				if resp.Close {
					// The server said it closes (HAProxy does so on reload with
					// idle-close-on-response): reconnect, as any HTTP client would.
					c.Close()
					c = nil
				}
			}
		}()
	}
	return l
}

func (l *keepAliveLoad) fail(msg string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, msg)
	}
	l.mu.Unlock()
}

func (l *keepAliveLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// TestReloadsUnderKeepAliveLoadFailNoRequest: 20 template changes, each a confirmed HAProxy
// reload, under a bounded keep-alive load on loopback; not one request may fail.
func TestReloadsUnderKeepAliveLoadFailNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("load test with a real HAProxy")
	}
	e := newDemoEnv(t)
	e.editFile(t, "config.yaml", func(s string) string {
		return strings.Replace(s, "  balance roundrobin\n", "  balance roundrobin\n      http-response set-header X-Gen gen-0\n", 1)
	})
	e.startSidecar(t)
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	reloadsBefore := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`)

	load := startLoad(e.httpAddr, "web.localhost", 8)
	const reloads = 20
	for i := 1; i <= reloads; i++ {
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, fmt.Sprintf("X-Gen gen-%d\n", i-1), fmt.Sprintf("X-Gen gen-%d\n", i), 1)
		})
		want := fmt.Sprintf("gen-%d", i)
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, _, h, _ := e.get("web.localhost", "/")
			return h.Get("X-Gen") == want
		}, "reload "+want+" serves")
		e.settled(t)
	}
	load.Stop()

	if got := e.metric(t, `haproxy_sidecar_reloads_total{endpoint="master-socket",result="success"}`) - reloadsBefore; got != reloads {
		t.Errorf("%v confirmed reloads, want %d", got, reloads)
	}
	t.Logf("%d requests succeeded, %d failed across %d reloads", load.ok.Load(), load.failed.Load(), reloads)
	if load.ok.Load() < 100 {
		t.Errorf("only %d requests succeeded: the load did not run", load.ok.Load())
	}
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d requests failed during reloads; first errors: %v", n, load.errs)
	}
}
