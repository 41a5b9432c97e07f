// Package httpserver serves the sidecar's HTTP endpoints: /metrics, Go's profiles, and the
// health endpoints, on one listener when their addresses are the same.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Options say what to serve where; an empty address serves nothing.
type Options struct {
	MetricsAddr string
	HealthAddr  string
	// Profiles also serves Go's profiles (/debug/pprof/) on MetricsAddr.
	Profiles bool
	// Metrics serves /metrics.
	Metrics http.Handler
	// Health registers the health endpoints on a mux (nil: none).
	Health func(*http.ServeMux)
}

// Serve listens on the addresses and serves until ctx ends; it returns once listening (or
// with the error of a listener that could not start).
func Serve(ctx context.Context, log *slog.Logger, o Options) error {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if muxes[addr] == nil {
			muxes[addr] = http.NewServeMux()
		}
		return muxes[addr]
	}
	if o.MetricsAddr != "" {
		mx := mux(o.MetricsAddr)
		mx.Handle("/metrics", o.Metrics)
		if o.Profiles {
			mx.HandleFunc("/debug/pprof/", pprof.Index)
			mx.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mx.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mx.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mx.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
	}
	if o.HealthAddr != "" && o.Health != nil {
		o.Health(mux(o.HealthAddr))
	}
	for addr, mx := range muxes {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: mx, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "addr", addr, "error", err)
			}
		}()
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("serving", "addr", ln.Addr().String())
	}
	return nil
}
