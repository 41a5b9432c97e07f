package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/dataplane"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// dataplaneMode is the --reload=dataplane wiring: the Reloader, and the pipeline's renderer,
// whose ssldir is the hosts' certificate storage directory, which may be learned after start
// (a fresh host's storage is empty): a change renders again.
type dataplaneMode struct {
	*dataplane.Reloader
	store      *generation.Store
	renderOpts render.Options // the render budgets (SSLDir set by setDir)

	mu       sync.Mutex
	dir      string // the storage directory templates see as ssldir
	renderer *render.Renderer
	changed  func() // asks the pipeline to render again
}

// startDataplane connects the Reloader and decides the templates' ssldir before the first
// rendering: --dataplane-ssl-dir, else the directory the hosts' storage lists, else the Data
// Plane API's default until a host says (see package dataplane). recorder is read when a host
// reports, so that it can be set after this returns.
func startDataplane(ctx context.Context, cfg *config.Run, store *generation.Store, metrics *status.Metrics, recorder *apply.Recorder, log *slog.Logger, red *redactor) (*dataplaneMode, error) {
	o := cfg.Dataplane
	spiffe := o.SPIFFESocket
	if spiffe == "" {
		spiffe = os.Getenv("SPIFFE_ENDPOINT_SOCKET")
	}
	d := &dataplaneMode{store: store, renderOpts: cfg.Render.Options("")}
	template := templateObject(cfg.Inputs)
	event := func(warning bool, reason, message string) {
		if *recorder != nil {
			(*recorder).Event(template, warning, reason, message)
		}
	}
	var canary *dataplane.Canary
	if r := cfg.Rollout; r.Canary() {
		canary = &dataplane.Canary{Window: r.Window, PromoteInconclusive: r.Inconclusive == "promote",
			Thresholds: rollout.Thresholds{Max5xxRatio: r.Max5xxRatio, MaxConnErrorRatio: r.MaxConnErrorRatio,
				MaxFailedChecks: r.MaxFailedChecks, MinRequests: int64(r.MinRequests)},
			OnVerdict: func(ep string, j rollout.Judgement, promoted bool) {
				result := "rolled_back"
				if promoted {
					result = "promoted"
				}
				metrics.CanaryVerdicts.WithLabelValues(j.Verdict.String(), result).Inc()
				// A failed canary is reported on the inputs it holds back; a promotion here.
				switch {
				case promoted && j.Verdict == rollout.Pass:
					event(false, "CanaryPassed", fmt.Sprintf("canary HAProxy host %s: %s; the other hosts follow", ep, j.Reason))
				case promoted:
					event(true, "CanaryInconclusive", fmt.Sprintf("canary HAProxy host %s: %s; promoted all the same (--canary-inconclusive=promote)", ep, j.Reason))
				}
			}}
	}
	dp, err := dataplane.New(ctx, dataplane.Config{
		URLs: o.URLs, Username: o.Username, Password: o.Password,
		PasswordFile: o.PasswordFile, Token: o.Token, Secret: red.onChange("dataplane-file"),
		CACert: o.CACert, Cert: o.Cert, Key: o.Key,
		SPIFFESocket: spiffe, SPIFFEID: o.SPIFFEID,
		ConfigPath: store.ConfigPath(), CertDir: store.SSLDir(), SSLDir: o.SSLDir,
		MapsDir: store.MapsDir(), FilesDir: store.FilesDir(),
		MapsStorageDir: o.MapsDir, FilesStorageDir: o.FilesDir,
		Timeout: cfg.HAProxy.ReloadTimeout, Logger: log,
		StateFile: filepath.Join(store.StateDir(), "dataplane-hosts.json"),
		Canary:    canary,
		OnResult: func(ep, result string) {
			metrics.Reloads.WithLabelValues(ep, result).Inc()
			// Per-host outcome on the object holding the template, in the Kubernetes modes.
			event(result != dataplane.ResultSuccess, "Host"+strings.ToUpper(result[:1])+result[1:],
				fmt.Sprintf("HAProxy host %s: %s", ep, result))
		},
		OnConfirmed: func(ctx context.Context, _ string) { metrics.ObserveLive(ctx, live.PathDataplane) },
		OnSSLDir:    d.setDir,
		OnWarning: func(reason, message string) {
			event(true, reason, message)
		},
		Mode: o.Mode, Backends: o.Backends,
	})
	if err != nil {
		return nil, err
	}
	d.Reloader = dp
	metrics.Reloading(dp.Endpoints()...)
	if serversMode(cfg) {
		// Only servers are written: the hosts' storages are not used, templates see the
		// directories given (or the API's defaults).
		store.SetTemplateMapsDirs(dp.MapsDir())
		store.SetTemplateFilesDirs(dp.FilesDir())
		d.renderOpts.MapsDir, d.renderOpts.FilesDir = dp.MapsDir(), dp.FilesDir()
		d.setDir(dp.SSLDir(), "")
		return d, nil
	}
	dir, err := dp.DiscoverSSLDir(ctx)
	if err != nil {
		dp.Close()
		return nil, fmt.Errorf("%w (or set --dataplane-ssl-dir)", err)
	}
	// The hosts' map and general storage directories: the templates' mapsdir and filesdir,
	// which the generation store checks as the staged maps and files.
	mapsDir, filesDir, err := dp.DiscoverAuxDirs(ctx)
	if err != nil {
		dp.Close()
		return nil, fmt.Errorf("%w (or set --dataplane-maps-dir and --dataplane-files-dir)", err)
	}
	store.SetTemplateMapsDirs(mapsDir)
	store.SetTemplateFilesDirs(filesDir)
	d.renderOpts.MapsDir, d.renderOpts.FilesDir = mapsDir, filesDir
	d.setDir(dir, "")
	return d, nil
}

// setDir makes dir the templates' ssldir; previous is the one they used before ("" at
// start). The generation store checks renderings made for either against the staged
// certificates (haproxy -c), then the pipeline renders again.
func (d *dataplaneMode) setDir(dir, previous string) {
	d.store.SetTemplateSSLDirs(dir, previous)
	d.mu.Lock()
	opts := d.renderOpts
	opts.SSLDir = dir
	d.dir, d.renderer = dir, render.New(opts)
	changed := d.changed
	d.mu.Unlock()
	if changed != nil && previous != "" {
		changed()
	}
}

// onChange sets what asks the pipeline to render again.
func (d *dataplaneMode) onChange(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.changed = fn
}

// Render renders with the current ssldir.
func (d *dataplaneMode) Render(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	d.mu.Lock()
	r := d.renderer
	d.mu.Unlock()
	return r.Render(ctx, s)
}

// RenderApart renders a test in the config beside the syncs' renders (render.Renderer's).
func (d *dataplaneMode) RenderApart(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error) {
	d.mu.Lock()
	r := d.renderer
	d.mu.Unlock()
	return r.RenderApart(ctx, s)
}
