package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// The loopback addresses three Data Plane API hosts' HAProxy listen on: one configuration
// binds "${HAPROXY_LOCALPEER}:PORT", which each stand-in sets to its own address.
var canaryPeers = []string{"127.0.6.2", "127.0.6.3", "127.0.6.4"}

// portOnPeers returns a port that was free on every peer address when it was chosen.
func portOnPeers(t *testing.T) int {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		port, ok := haproxytest.FreePort(t), true
		for _, ip := range canaryPeers {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatal("no port free on every peer address")
	return 0
}

// getFrom sends one request for host to addr and returns the status and body.
func getFrom(addr, host string) (int, string, error) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestDataPlaneCanary: --rollout=canary with three hosts behind the Data Plane API stand-in,
// each with a real HAProxy and clients sending requests. A template that makes HAProxy answer
// 503 goes to the first host only, is rolled back there when its counters show it, never
// reaches the other two, and is held like bad input (rejected_total{stage="canary"}, /readyz);
// the fixed template holds on the canary for the window and then reaches all three.
func TestDataPlaneCanary(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	port, tlsPort := portOnPeers(t), portOnPeers(t)
	t.Setenv("HTTP_BIND", fmt.Sprintf(`"${HAPROXY_LOCALPEER}:%d"`, port))
	t.Setenv("HTTPS_BIND", fmt.Sprintf(`"${HAPROXY_LOCALPEER}:%d"`, tlsPort))
	var hosts []*dataplanetest.Server
	var urls, addrs []string
	for _, peer := range canaryPeers {
		h := standIn(t, dataplanetest.Options{LocalPeer: peer, MasterRuntime: true})
		hosts = append(hosts, h)
		urls = append(urls, h.URL)
		addrs = append(addrs, net.JoinHostPort(peer, strconv.Itoa(port)))
	}
	runSidecar(t, io.Discard, append(e.sidecarArgs(), "--reload=dataplane", "--dataplane-url", strings.Join(urls, ","),
		"--state-dir", t.TempDir(), "--rollout=canary", "--canary-window=3s", "--canary-min-requests=5")...)
	e.waitReady(t)
	served := func(addr string) bool {
		code, body, err := getFrom(addr, "web.localhost")
		return err == nil && code == 200 && strings.HasPrefix(body, "web-")
	}
	for _, a := range addrs {
		haproxytest.WaitFor(t, 20*time.Second, func() bool { return served(a) }, "host "+a+" serves web.localhost")
	}

	// Clients, all along: the canary's counters need requests.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, a := range addrs {
				getFrom(a, "web.localhost")
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	t.Run("a template answering 503 is rolled back on the canary and held; the other hosts never see it", func(t *testing.T) {
		v0, v1, v2 := hosts[0].Version(), hosts[1].Version(), hosts[2].Version()
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "frontend http\n", "frontend http\n      http-request return status 503\n", 1)
		})
		// The counter grows as the hold is reported, just before /readyz lists it: wait for both.
		var r readyz
		haproxytest.WaitFor(t, 30*time.Second, func() bool {
			_, r = e.readyz(t)
			return e.metric(t, `haproxy_sidecar_rejected_total{stage="canary"}`) == 1 && len(r.Held) > 0
		}, "the canary's refusal is reported at stage canary")
		if n := e.metric(t, `haproxy_sidecar_canary_verdicts_total{result="rolled_back",verdict="fail"}`); n != 1 {
			t.Errorf("canary_verdicts_total{fail,rolled_back} = %v, want 1", n)
		}
		if len(r.Held) != 1 || r.Held[0].Input != "templates" || r.Held[0].Stage != "canary" || !r.Held[0].Kept ||
			!strings.Contains(r.Held[0].Reason, "5xx responses") || !strings.Contains(r.Held[0].Reason, hosts[0].URL) {
			t.Errorf("/readyz held = %+v, want the template at stage canary, naming the host and the 5xx", r.Held)
		}
		if hosts[0].Version() != v0+2 {
			t.Errorf("the canary's version %d, want %d: the new configuration, then the last good one", hosts[0].Version(), v0+2)
		}
		if hosts[1].Version() != v1 || hosts[2].Version() != v2 {
			t.Errorf("the other hosts were written: versions %d, %d, want %d, %d", hosts[1].Version(), hosts[2].Version(), v1, v2)
		}
		for _, a := range addrs {
			if !served(a) {
				t.Errorf("%s does not serve web.localhost after the rollback", a)
			}
		}
	})

	t.Run("the fixed template holds on the canary for the window, then reaches all three", func(t *testing.T) {
		v1, v2 := hosts[1].Version(), hosts[2].Version()
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "      http-request return status 503\n", "      http-response set-header X-Canary passed\n", 1)
		})
		haproxytest.WaitFor(t, 30*time.Second, func() bool {
			return e.metric(t, `haproxy_sidecar_canary_verdicts_total{result="promoted",verdict="pass"}`) == 1 &&
				hosts[1].Version() > v1 && hosts[2].Version() > v2
		}, "the canary passes and the other hosts follow")
		for _, a := range addrs {
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				req, _ := http.NewRequest("GET", "http://"+a+"/", nil)
				req.Host = "web.localhost"
				resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.Header.Get("X-Canary") == "passed"
			}, a+" runs the fixed template")
		}
		if _, r := e.readyz(t); len(r.Held) != 0 {
			t.Errorf("still held: %+v", r.Held)
		}
	})
}
