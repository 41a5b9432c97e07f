package loadgen

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

func TestKeepAliveCountsFailuresWithoutRetrying(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every fifth request fails; a retrying client would hide some of them.
		if n.Add(1)%5 == 0 {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	l := Start(srv.Listener.Addr().String(), "x", 2)
	_ = haproxytest.Poll(10*time.Second, func() bool { return l.OK() >= 100 })
	l.Stop()
	if l.OK() < 100 {
		t.Fatalf("only %d requests succeeded", l.OK())
	}
	total := l.OK() + l.Failed()
	if got := l.Failed(); got < total/5-2 || got > total/5+2 {
		t.Errorf("%d of %d failed, want about a fifth", got, total)
	}
	if errs := l.Errors(); len(errs) == 0 || errs[0] != "503 Service Unavailable" {
		t.Errorf("errors = %v", errs)
	}
}

func TestNewConnectionsDialsForEveryRequest(t *testing.T) {
	var conns, reqs atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		if !r.Close {
			t.Errorf("request without Connection: close")
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	l := StartNewConnections(srv.Listener.Addr().String(), "x", 2)
	_ = haproxytest.Poll(10*time.Second, func() bool { return l.OK() >= 50 })
	l.Stop()
	if l.OK() < 50 || l.Failed() != 0 {
		t.Fatalf("%d ok, %d failed: %v", l.OK(), l.Failed(), l.Errors())
	}
	if c, r := conns.Load(), reqs.Load(); c != r {
		t.Fatalf("%d connections for %d requests", c, r)
	}
}
