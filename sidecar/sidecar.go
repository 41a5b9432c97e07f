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
	"time"

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

// Run is the sidecar until ctx ends; with --shutdown-delay, /readyz answers 503 from then on and
// the sidecar keeps HAProxy configured that long more (drainFirst).
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
		memory.SampleHeap(cfg.HTTP.Profiles, os.Getenv)
	}
	warnWeakSecrets(log, cfg.Inputs, cfg.Source.Etcd, &cfg.Dataplane)
	return red.Error(run(ctx, cfg, env, log, red))
}

func run(ctx context.Context, cfg *config.Run, env Env, log *slog.Logger, red *redactor) error {
	build := Build()
	metrics, health, err := newStatus(build, red)
	if err != nil {
		return err
	}
	ctx, stop := drainFirst(ctx, cfg.HTTP.ShutdownDelay, health, log)
	defer stop()
	src, inputs, err := newInputs(cfg, metrics, health, log)
	if err != nil {
		return err
	}
	local, store, unlock, err := openGenerations(cfg, log)
	if err != nil {
		return err
	}
	defer unlock()
	rememberChoices(src, store, log)
	recordEnvironment(store, environment(cfg.Inputs), log)
	identity := instanceName(cfg.Leader)
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
	checker, err := newChecker(cfg)
	if err != nil {
		return err
	}
	kube := homeKube(src) // nil: not the Kubernetes source
	var stopEvents func()
	events, stopEvents = kubeEvents(ctx, kube, identity, log, red)
	defer stopEvents()
	election, standby := newElection(cfg.Leader, kube)
	watchOldWorkers(cfg.HAProxy, metrics)
	tidier := env.Memory.Tidier()
	defer tidier.FollowCollections()()
	if cfg.Memory.ReleaseBinaryPages {
		tidier.ReleaseBinaryPages(func(err error) {
			log.Info("the binary's pages are kept when idle: handing them back failed", "error", err)
		})
	}
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
		RenderAhead:       cfg.Wait.Ahead,
		WaitMax:           cfg.Wait.Max,
		Metrics:           metrics,
		Health:            health,
		Recorder:          events,
		Standby:           standby,
		Logger:            log,
		Runtime:           haproxy.runtime,
		MinReloadInterval: cfg.HAProxy.MinReloadInterval,
		Started:           tidier.Started,
		AfterSync:         tidier.AfterSync,
		Idle:              tidier.Idle,
		Quiet:             tidier.Quiet,
		PublishGoodInputs: cfg.Webhook.Addr != "", // for the admission webhook only
		KeepInputs:        true,
		TryTemplatesApart: true,
		CheckAfter:        !cfg.HAProxy.CheckBeforeRuntime,
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
	stopStatus, err := startObjectStatus(ctx, cfg, kube, p.HAProxy, standby, haproxy, events, log)
	if err != nil {
		return err
	}
	defer stopStatus()
	if err := serveHTTP(ctx, cfg.HTTP, metrics, health, log); err != nil {
		return err
	}
	stopWebhook, err := startWebhook(ctx, cfg, src, haproxy.renderer, p.GoodInputs,
		generation.ExportPaths{SSLDir: local.ssl, MapsDir: store.MapsDir(), FilesDir: store.FilesDir()}, log, red)
	if err != nil {
		return err
	}
	defer stopWebhook()
	stopElection, err := startElection(ctx, election, cfg, kube, identity, p.Changed, log)
	if err != nil {
		return err
	}
	defer stopElection()
	logStarting(log, build, cfg, local, store, env.Memory)
	return p.Run(ctx)
}

// drainFirst returns the context the sidecar works under: when ctx ends (the stop signal), /readyz
// turns 503 at once and the work goes on for delay more, so that the load balancers that follow
// the pod's readiness stop sending it new connections while HAProxy still serves them (HAProxy
// stops after, on its own signal: docs/kubernetes.md#draining). A zero delay stops at once, as
// the health server's end makes the pod unready as well. stop releases it.
func drainFirst(ctx context.Context, delay time.Duration, health *status.Health, log *slog.Logger) (work context.Context, stop func()) {
	if delay <= 0 {
		return ctx, func() {}
	}
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-work.Done():
			return
		case <-ctx.Done():
		}
		health.Stopping()
		log.Info("stopping: /readyz answers 503 while HAProxy keeps serving; the sidecar stops after --shutdown-delay", "shutdown_delay", delay)
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-work.Done():
		}
		cancel()
	}()
	return work, cancel
}

// newStatus makes the metrics, with the build's, and the health that the probes answer and
// the metrics read.
func newStatus(build BuildInfo, red *redactor) (*status.Metrics, *status.Health, error) {
	metrics := status.NewMetrics()
	metrics.SetBuildInfo(build.Version, build.GoVersion, build.Revision)
	health := &status.Health{Redact: red.String}
	if err := metrics.ObserveHealth(health); err != nil {
		return nil, nil, err
	}
	return metrics, health, nil
}

// openGenerations finds the local files (localPaths), locks their state directory against
// another sidecar and opens the generations there. unlock releases the lock.
func openGenerations(cfg *config.Run, log *slog.Logger) (l local, store *generation.Store, unlock func(), err error) {
	if l, err = localPaths(cfg, log); err != nil {
		return local{}, nil, nil, err
	}
	if unlock, err = generation.Lock(l.state); err != nil {
		return local{}, nil, nil, err
	}
	store, err = generation.Open(l.config, l.ssl, l.state, generation.WithLogger(log),
		generation.WithMapsDir(l.maps), generation.WithFilesDir(l.files), generation.WithRecordDir(l.record))
	if err != nil {
		unlock()
		return local{}, nil, nil, fmt.Errorf("open generations for %s: %w", l.config, err)
	}
	return l, store, unlock, nil
}

// instanceName names this sidecar in Events, the leader election and traces: its pod's name
// (--pod-name), else the host's.
func instanceName(l config.Leader) string {
	if l.PodName != "" {
		return l.PodName
	}
	name, _ := os.Hostname()
	return name
}

// serveHTTP serves the metrics, the health probes and the profiles until ctx ends.
func serveHTTP(ctx context.Context, h config.HTTP, metrics *status.Metrics, health *status.Health, log *slog.Logger) error {
	return httpserver.Serve(ctx, log, httpserver.Options{
		MetricsAddr: h.MetricsAddr, HealthAddr: h.HealthAddr, Profiles: h.Profiles,
		Metrics: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{Registry: metrics.Registry}),
		Health:  health.Register,
	})
}

// kubeEvents records Events on the objects the inputs come from, with the Kubernetes source
// (kube); stop sends what is left. Without it, there are none.
func kubeEvents(ctx context.Context, kube *watcher.Kube, identity string, log *slog.Logger, red *redactor) (events apply.Recorder, stop func()) {
	if kube == nil {
		return nil, func() {}
	}
	ev := status.NewKubeEvents(ctx, kube.Client, "haproxy-sidecar", identity, kube.Lookup, log)
	ev.Redact = red.String
	return ev, ev.Shutdown
}

// newElection is the election of the replica that acts (--leader-elect, with the Kubernetes
// source), and standby, which says whether this one stands by; nil for both without.
func newElection(l config.Leader, kube *watcher.Kube) (e *leader.Election, standby func() bool) {
	if kube == nil || !l.Elect {
		return nil, nil
	}
	e = &leader.Election{}
	return e, e.Standby
}

// startElection enters e, the election of the replica that acts, through a Lease in
// --leader-election-namespace (default: --namespace); onLeading is called when this one
// takes the lead. Without an election (nil) it does nothing.
func startElection(ctx context.Context, e *leader.Election, cfg *config.Run, kube *watcher.Kube, identity string, onLeading func(), log *slog.Logger) (stop func(), _ error) {
	if e == nil {
		return func() {}, nil
	}
	ns := cfg.Leader.Namespace
	if ns == "" {
		ns = cfg.Inputs.Namespace
	}
	return e.Start(ctx, kube.Client, leader.Options{
		Namespace: ns, Name: cfg.Leader.Name, Identity: identity,
		LeaseDuration: cfg.Leader.LeaseDuration, RenewDeadline: cfg.Leader.RenewDeadline, RetryPeriod: cfg.Leader.RetryPeriod,
		OnLeading: onLeading,
	}, log)
}

// logStarting says what this sidecar runs and where it writes.
func logStarting(log *slog.Logger, build BuildInfo, cfg *config.Run, l local, store *generation.Store, mem memory.Settings) {
	attrs := []any{"version", build.Version, "revision", build.Revision, "go_version", build.GoVersion, "source", cfg.Source.Kind, "dir", cfg.Source.Dir, "haproxy_config", l.config,
		"ssl_dir", l.ssl, "maps_dir", store.MapsDir(), "files_dir", store.FilesDir(), "state_dir", store.StateDir(),
		"reload", cfg.HAProxy.Reload, "wait", cfg.Wait.String()}
	log.Info("starting", append(attrs, mem.Attrs()...)...)
}

// homeKube is the kube source of the cluster of the load balancer's namespace (where Events,
// the lease and the status of objects are written), nil for the other sources.
func homeKube(src pipeline.Source) *watcher.Kube {
	switch s := src.(type) {
	case *watcher.Kube:
		return s
	case *watcher.Clusters:
		return s.Home
	}
	return nil
}

// sourceState reports whether the source is followed: haproxy_sidecar_source_up and /readyz
// (a reason, not unreadiness: HAProxy keeps serving what it runs).
// newInputs makes the source of the objects and the options the snapshot is built with from
// them: what a sync reads.
func newInputs(cfg *config.Run, metrics *status.Metrics, health *status.Health, log *slog.Logger) (pipeline.Source, snapshot.Options, error) {
	peers, err := peersOptions(cfg.Peers, cfg.Inputs.Namespace, cfg.Source)
	if err != nil {
		return nil, snapshot.Options{}, err
	}
	src, err := newSource(cfg.Source, cfg.Inputs, peers.Namespace, log, sourceState(metrics, health))
	if err != nil {
		return nil, snapshot.Options{}, err
	}
	if c, ok := src.(*watcher.Clusters); ok {
		c.OnCluster = metrics.PerCluster(c.Names())
		c.OnStoodIn = metrics.MemberReads(c.Names()[1:])
	}
	inputs, err := snapshotOptions(cfg.Inputs)
	if err != nil {
		return nil, snapshot.Options{}, err
	}
	inputs.Peers = peers
	return src, inputs, nil
}

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
