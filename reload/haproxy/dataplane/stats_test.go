package dataplane

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestSample: a host's counters as HAProxy counts them, read through a v2 and a v3 API: the
// requests and 5xx of a frontend answering 503, a server its checks hold down.
func TestSample(t *testing.T) {
	haproxytest.Binary(t)
	for _, api := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", api), func(t *testing.T) {
			port := haproxytest.FreePort(t)
			s := startHost(t, "127.0.0.1", dataplanetest.Options{APIVersion: api, MasterRuntime: true,
				Config: httpConfig(port, "127.0.0.1:1 check inter 50ms", "  http-request return status 503 if { path /503 }\n")})
			c, _, err := newClient(s.URL, nil, credentials{}, time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			c.hc = &http.Client{Timeout: 10 * time.Second}
			for i := 0; i < 3; i++ {
				if _, err := haproxytest.Get(fmt.Sprintf("127.0.0.1:%d/503", port)); err == nil || !strings.Contains(err.Error(), "503") {
					t.Fatalf("request %d: %v, want a 503", i, err)
				}
			}
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				smp, err := c.Sample(context.Background())
				return err == nil && strings.HasPrefix(smp.Servers["be/s1"].Status, "DOWN")
			}, "the server without a listener is down")
			smp, err := c.Sample(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if fe := smp.Frontends["fe"]; fe.Requests != 3 || fe.Responses5xx != 3 {
				t.Errorf("frontend fe = %+v, want 3 requests, 3 5xx", fe)
			}
			if s1 := smp.Servers["be/s1"]; s1.CheckDowns != 1 || !strings.HasSuffix(s1.CheckStatus, "L4CON") {
				t.Errorf("server be/s1 = %+v, want down once, L4CON", s1)
			}
			if _, ok := smp.Backends["be"]; !ok || smp.PID == 0 {
				t.Errorf("sample = %+v, want backend be and the worker's pid", smp)
			}
		})
	}
}
