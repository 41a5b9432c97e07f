package httpserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// TestServeProfiles: Go's profiles are served next to /metrics only with --pprof.
func TestServeProfiles(t *testing.T) {
	for _, profiles := range []bool{false, true} {
		t.Run(fmt.Sprintf("pprof=%v", profiles), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			m := status.NewMetrics()
			metrics := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
			if err := Serve(ctx, log, Options{MetricsAddr: addr, Profiles: profiles, Metrics: metrics}); err != nil {
				t.Fatal(err)
			}
			get := func(path string) int {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode
			}
			if code := get("/metrics"); code != http.StatusOK {
				t.Errorf("/metrics: %d", code)
			}
			want := http.StatusNotFound
			if profiles {
				want = http.StatusOK
			}
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?gc=1", "/debug/pprof/goroutine?debug=1"} {
				if code := get(path); code != want {
					t.Errorf("%s: %d, want %d", path, code, want)
				}
			}
			cancel()
			haproxytest.WaitFor(t, 5*time.Second, func() bool {
				resp, err := http.Get("http://" + addr + "/metrics")
				if err == nil {
					resp.Body.Close()
				}
				return err != nil
			}, "the server to stop")
		})
	}
}
