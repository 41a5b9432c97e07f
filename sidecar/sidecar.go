// Package sidecar is the program: it builds each stage from the configuration (package config)
// and runs them, `run` until its context ends (Run), `render` and `validate` once (Once).
// Package main only picks the command; the end-to-end tests drive the program through here.
//
// The folder wires the stages together. Its packages, from the command line to the loop:
//
//   - config: one configuration type per concern, each with its flags, environment variables
//     and validation; the commands compose them.
//   - memory: the Go runtime's memory settings, and the heap tidied after each sync.
//   - leader: leader election among replicas (only the leader applies).
//   - pipeline: the loop: debounce, then each sync from reading the inputs to acting on the
//     decision and reporting what happened; the HAProxy probe.
//   - sidecar (this package): each stage built from the configuration and started.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/httpserver"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/leader"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/memory"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// Env is what the process gives the program beyond its configuration.
type Env struct {
	// Log is where the log goes.
	Log io.Writer
	// Memory are the Go runtime's memory settings in effect, for the start-up line.
	Memory memory.Settings
	// Process is set when the program is the whole process: client-go's own log (klog, one
	// per process) is sent to the sidecar's.
	Process bool
}

// Run is the sidecar until ctx ends.
func Run(ctx context.Context, cfg *config.Run, env Env) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	red := newRedactor(cfg.Inputs, cfg.Source.Etcd, &cfg.Dataplane)
	log, err := newLogger(cfg.Log, env.Log, red)
	if err != nil {
		return err
	}
	if env.Process {
		klog.SetSlogLogger(log)
	}
	warnWeakSecrets(log, cfg.Inputs, cfg.Source.Etcd, &cfg.Dataplane)
	return red.Error(run(ctx, cfg, env, log, red))
}

func run(ctx context.Context, cfg *config.Run, env Env, log *slog.Logger, red *redactor) error {
	build := Build()
	metrics := status.NewMetrics()
	metrics.SetBuildInfo(build.Version, build.GoVersion, build.Revision)
	health := &status.Health{Redact: red.String}
	if err := metrics.ObserveHealth(health); err != nil {
		return err
	}
	src, err := newSource(cfg.Source, cfg.Inputs, log, sourceState(metrics, health))
	if err != nil {
		return err
	}
	inputs, err := snapshotOptions(cfg.Inputs)
	if err != nil {
		return err
	}
	local, err := localPaths(cfg, log)
	if err != nil {
		return err
	}
	unlock, err := generation.Lock(local.state)
	if err != nil {
		return err
	}
	defer unlock()
	store, err := generation.Open(local.config, local.ssl, local.state, generation.WithLogger(log),
		generation.WithMapsDir(local.maps), generation.WithFilesDir(local.files))
	if err != nil {
		return fmt.Errorf("open generations for %s: %w", local.config, err)
	}
	identity := cfg.Leader.PodName
	if identity == "" {
		identity, _ = os.Hostname()
	}
	tracer, stopTracing, err := startTracing(ctx, os.Getenv, build, identity, red.Redactor, log, env.Process)
	if err != nil {
		return err
	}
	defer stopTracing()
	var events apply.Recorder // Kubernetes Events, in the Kubernetes modes (set below)
	haproxy, err := newHAProxy(ctx, cfg, local, store, metrics, &events, log, red)
	if err != nil {
		return err
	}
	defer haproxy.close()
	checker, err := newChecker(cfg.Render)
	if err != nil {
		return err
	}
	if checker != nil && serversMode(cfg) {
		checker = serversChecker{haproxy: checker, backends: cfg.Dataplane.Backends}
	}
	var election *leader.Election
	var standby func() bool
	if kube, ok := src.(*watcher.Kube); ok {
		ev := status.NewKubeEvents(ctx, kube.Client, "haproxy-sidecar", identity, kube.Lookup, log)
		ev.Redact = red.String
		defer ev.Shutdown()
		events = ev
		if cfg.Leader.Elect {
			election = &leader.Election{}
			standby = election.Standby
		}
	}
	watchOldWorkers(cfg.HAProxy, metrics)
	p, err := pipeline.New(pipeline.Config{
		Source:            src,
		Inputs:            snapshot.Builder{Options: inputs},
		Renderer:          haproxy.renderer,
		Checker:           checker,
		Store:             store,
		Reloader:          haproxy.reloader,
		Endpoint:          haproxy.endpoint,
		ReloaderCounts:    haproxy.endpoint == "dataplane",
		WaitMin:           cfg.Wait.Min,
		WaitMax:           cfg.Wait.Max,
		Metrics:           metrics,
		Health:            health,
		Recorder:          events,
		Standby:           standby,
		Logger:            log,
		Runtime:           haproxy.runtime,
		MinReloadInterval: cfg.HAProxy.MinReloadInterval,
		AfterSync:         env.Memory.Tidier().AfterSync,
		KeepInputs:        true,
		TryTemplatesApart: true,
		Redactor:          red.Redactor,
		ExpectRunning:     local.expectRunning,
		ProbeInterval:     cfg.HAProxy.ProbeInterval,
		FindHAProxy:       func() int { return reload.FindProcess(local.config) },
		Manifests:         manifests(cfg.Inputs),
		Tracing:           tracer,
	})
	if err != nil {
		return err
	}
	haproxy.onChange(p.Changed)
	if kube, ok := src.(*watcher.Kube); ok {
		stop, err := startObjectStatus(ctx, cfg, kube, p.HAProxy, standby, haproxy, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := httpserver.Serve(ctx, log, httpserver.Options{
		MetricsAddr: cfg.HTTP.MetricsAddr, HealthAddr: cfg.HTTP.HealthAddr, Profiles: cfg.HTTP.Profiles,
		Metrics: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{Registry: metrics.Registry}),
		Health:  health.Register,
	}); err != nil {
		return err
	}
	stopWebhook, err := startWebhook(ctx, cfg, src, haproxy.renderer, p.GoodInputs,
		generation.ExportPaths{SSLDir: local.ssl, MapsDir: store.MapsDir(), FilesDir: store.FilesDir()}, log, red)
	if err != nil {
		return err
	}
	defer stopWebhook()
	if election != nil {
		ns := cfg.Leader.Namespace
		if ns == "" {
			ns = cfg.Inputs.Namespace
		}
		if err := election.Start(ctx, src.(*watcher.Kube).Client, leader.Options{
			Namespace: ns, Name: cfg.Leader.Name, Identity: identity,
			LeaseDuration: cfg.Leader.LeaseDuration, RenewDeadline: cfg.Leader.RenewDeadline, RetryPeriod: cfg.Leader.RetryPeriod,
			OnLeading: p.Changed,
		}, log); err != nil {
			return err
		}
	}
	attrs := []any{"version", build.Version, "revision", build.Revision, "go_version", build.GoVersion, "source", cfg.Source.Kind, "dir", cfg.Source.Dir, "haproxy_config", local.config,
		"ssl_dir", local.ssl, "maps_dir", store.MapsDir(), "files_dir", store.FilesDir(), "state_dir", store.StateDir(),
		"reload", cfg.HAProxy.Reload, "wait", cfg.Wait.String()}
	log.Info("starting", append(attrs, env.Memory.Attrs()...)...)
	return p.Run(ctx)
}

// sourceState reports whether the source is followed: haproxy_sidecar_source_up and /readyz
// (a reason, not unreadiness: HAProxy keeps serving what it runs).
func sourceState(metrics *status.Metrics, health *status.Health) watcher.StateFunc {
	return func(up bool, why error) {
		if up {
			metrics.SourceUp.Set(1)
			health.SourceUp()
			return
		}
		metrics.SourceUp.Set(0)
		if why == nil {
			why = errors.New("the source cannot be followed")
		}
		health.SourceDown(why)
	}
}
