package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// registerRuntime adds the run flags of the runtime API fast path and of reload pacing.
func (o *options) registerRuntime(fs *flag.FlagSet) {
	fs.BoolVar(&o.runtimeAPI, "runtime-api", true, "make server changes (added, removed, address, weight, disabled), certificate file changes and map file contents through HAProxy's runtime API, with no reload, when nothing else changed (docs/runtime-api.md); off: every change reloads")
	fs.StringVar(&o.runtimeSocket, "runtime-socket", "", "HAProxy stats socket (level admin) for the runtime API; default: the master socket, with @1")
	fs.DurationVar(&o.minReloadInterval, "min-reload-interval", 0, "least time between two reloads: a reload asked sooner waits, then loads the latest rendering (server, certificate and map changes still go live at once through the runtime API); 0: no minimum")
}

// newRuntime returns the runtime API updater, nil when runtime updates are off: --runtime-api
// is false, HAProxy is remote (--reload=dataplane), or no socket reaches the local worker.
func (o *options) newRuntime(sslDir, mapsDir string, log *slog.Logger) pipeline.Runtime {
	if !o.runtimeAPI || o.reloadMode == "dataplane" {
		return nil
	}
	opts := runtimeapi.Options{SSLDir: sslDir, MapsDir: mapsDir, Logger: log.With("component", "runtime-api")}
	switch {
	case o.runtimeSocket != "":
		opts.Client = &runtimeapi.Socket{Path: o.runtimeSocket}
	case o.reloadMode == "master-socket":
		opts.Client, opts.Prefix = &runtimeapi.Socket{Path: o.masterSocket}, "@1 "
	default:
		return nil
	}
	return runtimeapi.New(opts)
}

// watchOldWorkers exports haproxy_sidecar_old_workers, read from the master's show proc at
// each scrape, when the sidecar reloads through the master socket.
func (o *options) watchOldWorkers(m *status.Metrics) {
	if o.reloadMode != "master-socket" {
		return
	}
	master := &reload.MasterSocket{Path: o.masterSocket, Timeout: 2 * time.Second}
	m.Registry.MustRegister(status.NewOldWorkers(func(ctx context.Context) (int, error) {
		p, err := master.ShowProc(ctx)
		return p.OldWorkers, err
	}))
}
