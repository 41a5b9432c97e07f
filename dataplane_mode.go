package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/dataplane"
	"github.com/haproxy-sidecar/haproxy-sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/status"
)

// defaultHAProxyConfig is --haproxy-config when none is given (not with --reload=dataplane).
const defaultHAProxyConfig = "/etc/haproxy/haproxy.cfg"

// localPaths are the files the generation store keeps: the configuration HAProxy reads, the
// certificate directory and the state directory. With --reload=dataplane HAProxy is remote:
// the local files are only copies for `haproxy -c` and bookkeeping, all under the state
// directory (default defaultDataplaneStateDir), and --haproxy-config and --ssl-dir are not
// used, so that nothing of the machine's own HAProxy (its /etc/haproxy) is ever touched.
func (o *options) localPaths(log *slog.Logger) (cfgPath, sslDir, stateDir string, err error) {
	if o.reloadMode == "dataplane" {
		for _, f := range []struct{ name, value string }{{"--haproxy-config", o.haproxyConfig}, {"--ssl-dir", o.sslDir},
			{"--maps-dir", o.mapsDir}, {"--files-dir", o.filesDir}} {
			if f.value != "" {
				log.Warn(f.name+" is not used with --reload=dataplane (the hosts' files go through their Data Plane API; the local copies live under --state-dir); left untouched",
					"path", f.value)
			}
		}
		stateDir = o.stateDir
		if stateDir == "" {
			stateDir = defaultDataplaneStateDir(os.Getenv)
		}
		if stateDir, err = filepath.Abs(stateDir); err != nil {
			return "", "", "", err
		}
		return filepath.Join(stateDir, generation.ConfigName), filepath.Join(stateDir, generation.CertDirName), stateDir, nil
	}
	cfgPath = o.haproxyConfig
	if cfgPath == "" {
		cfgPath = defaultHAProxyConfig
	}
	if cfgPath, err = filepath.Abs(cfgPath); err != nil {
		return "", "", "", err
	}
	sslDir = o.sslDir
	if sslDir == "" {
		sslDir = filepath.Join(filepath.Dir(cfgPath), "certs")
	}
	if sslDir, err = filepath.Abs(sslDir); err != nil {
		return "", "", "", err
	}
	return cfgPath, sslDir, o.stateDir, nil
}

// localMapsDir and localFilesDir are --maps-dir and --files-dir where they are used ("": the
// generation store's default, beside the configuration; with --reload=dataplane, in the state
// directory).
func (o *options) localMapsDir() string {
	if o.reloadMode == "dataplane" {
		return ""
	}
	return o.mapsDir
}

func (o *options) localFilesDir() string {
	if o.reloadMode == "dataplane" {
		return ""
	}
	return o.filesDir
}

// defaultDataplaneStateDir is --state-dir's default with --reload=dataplane: a directory of
// the sidecar's own, $XDG_STATE_HOME/haproxy-sidecar/dataplane, else
// $HOME/.local/state/haproxy-sidecar/dataplane (the XDG default), else
// .haproxy-sidecar-dataplane in the working directory.
func defaultDataplaneStateDir(getenv func(string) string) string {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "haproxy-sidecar", "dataplane")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) && h != "/" {
		return filepath.Join(h, ".local", "state", "haproxy-sidecar", "dataplane")
	}
	return ".haproxy-sidecar-dataplane"
}

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
func (o *options) startDataplane(ctx context.Context, log *slog.Logger, store *generation.Store, metrics *status.Metrics, recorder *pipeline.Recorder) (*dataplaneMode, error) {
	spiffe := o.spiffeSocket
	if spiffe == "" {
		spiffe = os.Getenv("SPIFFE_ENDPOINT_SOCKET")
	}
	d := &dataplaneMode{store: store, renderOpts: o.renderOptions("")}
	event := func(warning bool, reason, message string) {
		if *recorder != nil {
			(*recorder).Event(o.templateObject(), warning, reason, message)
		}
	}
	dp, err := dataplane.New(ctx, dataplane.Config{
		URLs: o.dataplaneURLs, Username: o.dataplaneUser, Password: o.dataplanePassword,
		PasswordFile: o.dataplanePasswordFile, Token: o.dataplaneToken, Secret: o.secretOnChange("dataplane-file"),
		CACert: o.dataplaneCA, Cert: o.dataplaneCert, Key: o.dataplaneKey,
		SPIFFESocket: spiffe, SPIFFEID: o.dataplaneSPIFFEID,
		ConfigPath: store.ConfigPath(), CertDir: store.SSLDir(), SSLDir: o.dataplaneSSLDir,
		MapsDir: store.MapsDir(), FilesDir: store.FilesDir(),
		MapsStorageDir: o.dataplaneMapsDir, FilesStorageDir: o.dataplaneFilesDir,
		Timeout: o.reloadTimeout, Logger: log,
		StateFile: filepath.Join(store.StateDir(), "dataplane-hosts.json"),
		OnResult: func(ep, result string) {
			metrics.Reloads.WithLabelValues(ep, result).Inc()
			// Per-host outcome on the object holding the template, in the Kubernetes modes.
			event(result != dataplane.ResultSuccess, "Host"+strings.ToUpper(result[:1])+result[1:],
				fmt.Sprintf("HAProxy host %s: %s", ep, result))
		},
		OnSSLDir: d.setDir,
		OnWarning: func(reason, message string) {
			event(true, reason, message)
		},
	})
	if err != nil {
		return nil, err
	}
	d.Reloader = dp
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
