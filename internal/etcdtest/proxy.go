package etcdtest

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of etcd on loopback that a test can use to cut a client off, or
// make its connections hang silently, while etcd keeps running and others write to it. It is
// transparent to TLS (the server certificate names 127.0.0.1).
type Proxy struct {
	// Endpoint is the client URL to give the client under test instead of Server.Endpoint.
	Endpoint string

	target string
	l      net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond
	mode    proxyMode
	conns   map[net.Conn]struct{} // every open connection, both sides
	refused int                   // connections closed at once while cut
}

type proxyMode int

const (
	forwarding proxyMode = iota
	cut                  // new connections are closed at once, open ones were closed
	stalled              // bytes stop flowing both ways; connections stay open
)

// Proxy starts a proxy to the server, stopped when the test ends.
func (s *Server) Proxy() *Proxy {
	s.t.Helper()
	scheme, hostport, _ := strings.Cut(s.Endpoint, "://")
	return NewProxy(s.t, scheme, hostport)
}

// NewProxy starts a proxy to target (host:port) on a free loopback port; Endpoint is
// scheme://127.0.0.1:port. It is stopped when the test ends.
func NewProxy(t testing.TB, scheme, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{Endpoint: scheme + "://" + l.Addr().String(), target: target, l: l, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Cut closes every connection through the proxy and refuses new ones (they are accepted and
// closed at once), as when the network between the client and etcd goes down.
func (p *Proxy) Cut() { p.setMode(cut) }

// Stall stops forwarding bytes in both directions, on open and new connections alike, without
// closing anything: the silent stall of a half-dead network path.
func (p *Proxy) Stall() { p.setMode(stalled) }

// Restore forwards again. After a stall, every connection open during it is closed (the
// client reconnects), as a peer that timed out would.
func (p *Proxy) Restore() { p.setMode(forwarding) }

func (p *Proxy) setMode(m proxyMode) {
	p.mu.Lock()
	old := p.mode
	p.mode = m
	if m == cut || (old == stalled && m == forwarding) {
		for c := range p.conns {
			c.Close()
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.l.Close()
	p.setMode(cut)
	p.wg.Wait()
}

// Refused is how many connections the proxy closed at once because it was cut: how often the
// client tried to reconnect.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == cut {
		c.Close()
		p.refused++
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	p.mu.Lock()
	for p.mode == stalled {
		p.cond.Wait() // a connection made while stalled hangs until Restore closes it
	}
	p.mu.Unlock()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	pump := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32*1024)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !p.waitForwarding() {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					return
				}
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
		}
	}
	go pump(server, client)
	go pump(client, server)
	<-done
	client.Close()
	server.Close()
	<-done
}

// waitForwarding blocks while stalled; false when the proxy cut the connections.
func (p *Proxy) waitForwarding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == stalled {
		p.cond.Wait()
	}
	return p.mode == forwarding
}
