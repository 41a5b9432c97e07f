// Package status reports what the sidecar is doing: Prometheus metrics, health and readiness
// endpoints, and (through the Recorder interface) events on the objects operators edit.
package status

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the sidecar's Prometheus metrics, on a registry of their own (no global state).
type Metrics struct {
	Registry *prometheus.Registry

	Renders *prometheus.CounterVec // result: success, unchanged, error
	// RendersAhead counts the renderings made during the quiet period of --wait, by what
	// became of them: used by the sync that followed, or discarded (a change came after).
	RendersAhead      *prometheus.CounterVec
	Reloads           *prometheus.CounterVec // endpoint, result: success, failed, error
	Rejected          *prometheus.CounterVec // stage: decode, render, validate, reload, canary
	LastReloadSuccess prometheus.Gauge
	ConfigValid       prometheus.Gauge
	SourceUp          prometheus.Gauge
	// SourceUpByCluster replaces SourceUp with several clusters (PerCluster).
	SourceUpByCluster *prometheus.GaugeVec
	perCluster        atomic.Bool
	// ClusterReadStoodIn counts, by member cluster, the syncs in which its read did not end
	// within --cluster-read-wait (or failed) and its last read stood in (MemberReads).
	ClusterReadStoodIn *prometheus.CounterVec
	RenderDuration     prometheus.Histogram
	ValidateDuration   prometheus.Histogram
	ReloadDuration     prometheus.Histogram
	LiveGenerationInfo *prometheus.GaugeVec // hash
	// ChangeToLive is the time from a change seen to the configuration holding it live, by
	// path (live.PathRuntime, live.PathReload, live.PathDataplane): ObserveLive.
	ChangeToLive *prometheus.HistogramVec

	// Runtime API updates (no reload).
	RuntimeUpdates   *prometheus.CounterVec // kind (runtimeapi.Kinds)
	ReloadsAvoided   prometheus.Counter
	RuntimeFallbacks prometheus.Counter

	// HeldInputs counts the operator inputs held back, by kind (service, templates,
	// certificate); SyncFailures the syncs that failed for reasons other than bad input, by
	// stage; HAProxyUp is 1 while HAProxy answers on its socket.
	HeldInputs   *prometheus.GaugeVec
	SyncFailures *prometheus.CounterVec
	HAProxyUp    prometheus.Gauge

	// CanaryVerdicts counts the canary verdicts of --rollout=canary: verdict (pass, fail,
	// inconclusive) and result (promoted, rolled_back).
	CanaryVerdicts *prometheus.CounterVec

	// BuildInfo is 1 for the binary's version, Go version and revision (SetBuildInfo).
	BuildInfo *prometheus.GaugeVec
}

// Results of a reload (haproxy_sidecar_reloads_total's result label).
var reloadResults = []string{"success", "failed", "error"}

// NewMetrics registers the sidecar's metrics, plus the Go and process collectors, on a new
// registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Renders: counterVec("renders_total",
			"Renders of the templates, by result (success, unchanged, error).", "result"),
		RendersAhead: counterVec("renders_ahead_total",
			"Renderings made during the quiet period of --wait (--render-ahead), by result (used: the sync that followed took it; discarded: a change came after its read).", "result"),
		Reloads: counterVec("reloads_total",
			"HAProxy reloads, by endpoint and result (success, failed: HAProxy refused the config, error: could not reload).", "endpoint", "result"),
		Rejected: counterVec("rejected_total",
			"Inputs rejected before they reached HAProxy, by stage (decode, render, validate, reload, canary).", "stage"),
		LastReloadSuccess: gauge("last_reload_success_timestamp_seconds",
			"Unix time of the last confirmed successful reload, or of the start of the sidecar when it confirmed then that HAProxy runs its configuration (no reload needed); 0 until either."),
		ConfigValid: gauge("config_valid",
			"1 if the latest inputs produced a valid configuration, 0 if they were rejected (the last good configuration keeps serving)."),
		SourceUp: gauge("source_up",
			"1 while the source of inputs (directory, Kubernetes API, etcd) is reachable."),
		SourceUpByCluster: gaugeVec("source_up",
			"1 while the cluster's Kubernetes API is reachable (the kube source over several clusters), by cluster.", "cluster"),
		ClusterReadStoodIn: counterVec("cluster_read_stood_in_total",
			"Syncs in which a member cluster's read did not end within --cluster-read-wait, or failed, and its pods and watched objects as last read stood in (none when it never was read), by cluster.", "cluster"),
		RenderDuration: histogram("render_duration_seconds",
			"Time to build the snapshot and render the templates.", prometheus.ExponentialBuckets(0.001, 2, 14)),
		ValidateDuration: histogram("validate_duration_seconds",
			"Time spent in haproxy -c.", prometheus.ExponentialBuckets(0.01, 2, 12)),
		ReloadDuration: histogram("reload_duration_seconds",
			"Time from asking for a reload to its confirmation.", prometheus.ExponentialBuckets(0.01, 2, 12)),
		LiveGenerationInfo: gaugeVec("live_config_info",
			"1 for the hash of the configuration HAProxy runs.", "hash"),
		ChangeToLive: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "change_to_live_seconds",
			Help:    "Time from a change first seen (the source's notification, before the quiet period) to the configuration holding it live, by path: runtime (the runtime API answered), reload (the reload confirmed), dataplane (a Data Plane API host confirmed it, one observation per host).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60},
		}, []string{"path"}),
		RuntimeUpdates: counterVec("runtime_updates_total",
			"Changes made through HAProxy's runtime API instead of a reload, by kind (server_added, server_removed, server_updated, certificate_updated, certificate_added, certificate_removed, map_updated, backend_added, backend_removed).", "kind"),
		ReloadsAvoided: counter("reloads_avoided_total",
			"Configuration changes that went live with no reload (runtime API, or nothing HAProxy uses changed)."),
		RuntimeFallbacks: counter("runtime_fallbacks_total",
			"Runtime API updates that failed and fell back to a reload."),
		HeldInputs: gaugeVec("held_inputs",
			"Operator inputs held back at their last good version (or left out) because they are bad, by kind (service, templates, certificate; pod, endpointslice or a watched resource's kind (ingress, ...): cluster data left out, or at its last good version, because the template cannot print it or HAProxy refuses it; file: a manifest the file source cannot read, its last good objects standing in); /readyz lists them with the reason.", "kind"),
		SyncFailures: counterVec("sync_failures_total",
			"Syncs that failed for a reason other than bad input, by stage (read, stage, validate, activate, reload, write, state); they are retried.", "stage"),
		HAProxyUp: gauge("haproxy_up",
			"1 while HAProxy answers on its master socket (or Data Plane API), 0 when it does not."),
		CanaryVerdicts: counterVec("canary_verdicts_total",
			"Canary hosts watched before the other Data Plane API hosts followed (--rollout=canary), by verdict (pass, fail, inconclusive) and result (promoted, rolled_back).", "verdict", "result"),
		BuildInfo: gaugeVec("build_info",
			"1, labelled with the sidecar's version, the Go version it was built with and its source revision.", "version", "go_version", "revision"),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Renders, m.RendersAhead, m.Reloads, m.Rejected, m.LastReloadSuccess, m.ConfigValid, sourceUp{m}, m.ClusterReadStoodIn,
		m.RenderDuration, m.ValidateDuration, m.ReloadDuration, m.LiveGenerationInfo, m.ChangeToLive,
		m.RuntimeUpdates, m.ReloadsAvoided, m.RuntimeFallbacks,
		m.HeldInputs, m.SyncFailures, m.HAProxyUp, m.BuildInfo, m.CanaryVerdicts,
	)
	m.startAtZero()
	return m
}

// PerCluster makes source_up one gauge per cluster (labelled cluster) instead of one, each 0
// until its cluster answers, and returns the function that sets them.
func (m *Metrics) PerCluster(names []string) func(cluster string, up bool) {
	m.perCluster.Store(true)
	for _, n := range names {
		m.SourceUpByCluster.WithLabelValues(n).Set(0)
	}
	return func(cluster string, up bool) {
		v := 0.0
		if up {
			v = 1
		}
		m.SourceUpByCluster.WithLabelValues(cluster).Set(v)
	}
}

// MemberReads starts cluster_read_stood_in_total at 0 for each member cluster and returns the
// function that counts one for a cluster (watcher.Clusters.OnStoodIn).
func (m *Metrics) MemberReads(members []string) func(cluster string) {
	for _, n := range members {
		m.ClusterReadStoodIn.WithLabelValues(n)
	}
	return func(cluster string) { m.ClusterReadStoodIn.WithLabelValues(cluster).Inc() }
}

// sourceUp collects source_up in one of its two shapes: one gauge, or one per cluster. It
// describes nothing (an unchecked collector): the registry would refuse one name with two
// sets of labels.
type sourceUp struct{ m *Metrics }

func (sourceUp) Describe(chan<- *prometheus.Desc) {}

func (s sourceUp) Collect(ch chan<- prometheus.Metric) {
	if s.m.perCluster.Load() {
		s.m.SourceUpByCluster.Collect(ch)
		return
	}
	s.m.SourceUp.Collect(ch)
}

// namespace prefixes every metric's name.
const namespace = "haproxy_sidecar"

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
}

// startAtZero makes every series whose label values are known at start exist at 0, so that
// rate() and increase() see the first event (a series born at 1 shows no increase);
// reloads_total's endpoints are known once the reload target is (Reloading).
func (m *Metrics) startAtZero() {
	for _, k := range []string{"service", "templates", "certificate", "pod", "file"} {
		m.HeldInputs.WithLabelValues(k)
	}
	for _, s := range failure.Stages {
		m.SyncFailures.WithLabelValues(s)
	}
	for _, k := range runtimeapi.Kinds {
		m.RuntimeUpdates.WithLabelValues(k)
	}
	for _, r := range []string{"success", "unchanged", "error"} {
		m.Renders.WithLabelValues(r)
	}
	for _, r := range []string{"used", "discarded"} {
		m.RendersAhead.WithLabelValues(r)
	}
	for _, s := range []string{snapshot.StageDecode, snapshot.StageRender, snapshot.StageTest, snapshot.StageValidate, snapshot.StageReload} {
		m.Rejected.WithLabelValues(s)
	}
	for _, p := range []string{live.PathRuntime, live.PathReload, live.PathDataplane} {
		m.ChangeToLive.WithLabelValues(p)
	}
}

// Reloading makes reloads_total's series of each endpoint (the reload target, or each Data
// Plane API host) exist at 0 for every result.
func (m *Metrics) Reloading(endpoints ...string) {
	for _, ep := range endpoints {
		for _, r := range reloadResults {
			m.Reloads.WithLabelValues(ep, r)
		}
	}
}

// ReloadSucceeded records a confirmed reload; endpoint "" when the reloader counted it.
func (m *Metrics) ReloadSucceeded(endpoint string, took time.Duration, hash string) {
	if endpoint != "" {
		m.Reloads.WithLabelValues(endpoint, "success").Inc()
	}
	m.ReloadDuration.Observe(took.Seconds())
	m.LastReloadSuccess.SetToCurrentTime()
	m.LiveGenerationInfo.Reset()
	m.LiveGenerationInfo.WithLabelValues(hash).Set(1)
}

// Rendered counts a rendering by what became of it (renders_total{result}).
func (m *Metrics) Rendered(result string) { m.Renders.WithLabelValues(result).Inc() }

// Valid records that the configuration rendered is valid (a standby validated it).
func (m *Metrics) Valid() { m.ConfigValid.Set(1) }

// SyncFailed counts an operational failure at stage (package failure).
func (m *Metrics) SyncFailed(stage string) { m.SyncFailures.WithLabelValues(stage).Inc() }

// ReloadEnded counts a reload that did not succeed: result "failed" (HAProxy refused it) or
// "error" (its outcome is not known).
func (m *Metrics) ReloadEnded(endpoint, result string) {
	m.Reloads.WithLabelValues(endpoint, result).Inc()
}

// RuntimeUpdated counts the runtime API's changes, by kind (runtimeapi.Kinds).
func (m *Metrics) RuntimeUpdated(counts map[string]int) {
	for kind, n := range counts {
		m.RuntimeUpdates.WithLabelValues(kind).Add(float64(n))
	}
}

// RuntimeFellBack counts a runtime API update that failed, made by a reload instead.
func (m *Metrics) RuntimeFellBack() { m.RuntimeFallbacks.Inc() }

// LiveAgain records that the rendering hash is live again (a revert took HAProxy back to it).
func (m *Metrics) LiveAgain(hash string) {
	m.LiveGenerationInfo.Reset()
	m.LiveGenerationInfo.WithLabelValues(hash).Set(1)
}

// RunsConfirmed records that HAProxy was found running the configuration hash, which the
// sidecar made live before (adopted at start, or loaded by HAProxy as it started): as good as
// a confirmed reload for last_reload_success_timestamp_seconds, so that an alert on a reload
// long past does not fire for a sidecar that had nothing to reload.
func (m *Metrics) RunsConfirmed(hash string) {
	m.LastReloadSuccess.SetToCurrentTime()
	m.LiveGenerationInfo.Reset()
	m.LiveGenerationInfo.WithLabelValues(hash).Set(1)
}

// RuntimeApplied records a change that went live with no reload.
func (m *Metrics) RuntimeApplied(hash string) {
	m.ReloadsAvoided.Inc()
	m.LiveGenerationInfo.Reset()
	m.LiveGenerationInfo.WithLabelValues(hash).Set(1)
}

type changeSeenKey struct{}

// WithChangeSeen returns a context that says when the change being made live was first seen
// (a source's notification), for ObserveLive; a zero seen says nothing.
func WithChangeSeen(ctx context.Context, seen time.Time) context.Context {
	if seen.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, changeSeenKey{}, seen)
}

// ObserveLive records in haproxy_sidecar_change_to_live_seconds{path} that the change ctx
// carries (WithChangeSeen) is live now; a context without one (the first sync at start,
// which no change asked for) records nothing.
func (m *Metrics) ObserveLive(ctx context.Context, path string) {
	if seen, ok := ctx.Value(changeSeenKey{}).(time.Time); ok {
		m.ChangeToLive.WithLabelValues(path).Observe(time.Since(seen).Seconds())
	}
}

// WatchHAProxy exports what the record of HAProxy says (package live) as gauges read at each
// scrape: haproxy_sidecar_files_behind is 1 while HAProxy runs a change (made through the
// runtime API) that the files on disk do not hold yet (the disk is full, say), so that a
// reload or restart would lose it until they do.
func (m *Metrics) WatchHAProxy(state func() live.State) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "haproxy_sidecar", Name: "files_behind",
		Help: "1 while HAProxy runs a change the files on disk do not hold yet (they are written when there is room), else 0.",
	}, func() float64 {
		if s := state(); s.Runs != "" && s.Good.Gen != nil && s.Runs != s.Good.Gen.Hash {
			return 1
		}
		return 0
	}))
}

// SetBuildInfo sets haproxy_sidecar_build_info for this binary.
func (m *Metrics) SetBuildInfo(version, goVersion, revision string) {
	m.BuildInfo.Reset()
	m.BuildInfo.WithLabelValues(version, goVersion, revision).Set(1)
}

// ObserveHealth adds the gauges read from h at each scrape: haproxy_sidecar_ready (what
// /readyz answers) and haproxy_sidecar_failing_since_timestamp_seconds (how long the latest
// changes have waited to go live), which the alert rules use.
func (m *Metrics) ObserveHealth(h *Health) error {
	const ns = "haproxy_sidecar"
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Name: "ready",
		Help: "1 while /readyz answers 200: a good configuration is live and HAProxy is not known to be down (or this instance stands by).",
	}, func() float64 { return boolGauge(h.Ready()) })
	failing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Name: "failing_since_timestamp_seconds",
		Help: "Unix time since when the syncs have failed in a row to make the latest changes live (sync failures, a configuration HAProxy refused, no rendering possible); 0 once one goes through. Inputs held one by one do not count (haproxy_sidecar_held_inputs).",
	}, func() float64 { return unixOrZero(h.FailingSince()) })
	for _, c := range []prometheus.Collector{ready, failing} {
		if err := m.Registry.Register(c); err != nil {
			return fmt.Errorf("register the health gauges: %w", err)
		}
	}
	return nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixOrZero(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
