package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// local are the files the generation store keeps: the configuration HAProxy reads, the
// certificate, map and file directories, and the state directory ("": the store's default).
type local struct {
	config, ssl, maps, files, state string
	// record is --record-dir ("": the state directory).
	record string
	// expectRunning: a configuration HAProxy may already run exists, so not reaching HAProxy
	// is an error, not "not running yet".
	expectRunning bool
}

// localPaths are the local files. With --reload=dataplane HAProxy is remote: the local files
// are only copies for `haproxy -c` and bookkeeping, all under the state directory (default
// defaultDataplaneStateDir), and --haproxy-config, --ssl-dir, --maps-dir and --files-dir are
// not used, so that nothing of the machine's own HAProxy (its /etc/haproxy) is ever touched.
func localPaths(cfg *config.Run, log *slog.Logger) (local, error) {
	var l local
	var err error
	if cfg.HAProxy.Remote() {
		for _, f := range []struct{ name, value string }{{"--haproxy-config", cfg.HAProxy.Config}, {"--ssl-dir", cfg.Dirs.SSL},
			{"--maps-dir", cfg.Dirs.Maps}, {"--files-dir", cfg.Dirs.Files}} {
			if f.value != "" {
				log.Warn(f.name+" is not used with --reload=dataplane (the hosts' files go through their Data Plane API; the local copies live under --state-dir); left untouched",
					"path", f.value)
			}
		}
		l.state, l.record = cfg.HAProxy.StateDir, cfg.HAProxy.RecordDir
		if l.state == "" {
			l.state = defaultDataplaneStateDir(os.Getenv)
		}
		if l.state, err = filepath.Abs(l.state); err != nil {
			return l, err
		}
		l.config, l.ssl = filepath.Join(l.state, generation.ConfigName), filepath.Join(l.state, generation.CertDirName)
		return l, nil
	}
	l.config = cfg.HAProxy.Config
	if l.config == "" {
		l.config = config.DefaultHAProxyConfig
	}
	if l.config, err = filepath.Abs(l.config); err != nil {
		return l, err
	}
	l.ssl = cfg.Dirs.SSL
	if l.ssl == "" {
		l.ssl = filepath.Join(filepath.Dir(l.config), "certs")
	}
	if l.ssl, err = filepath.Abs(l.ssl); err != nil {
		return l, err
	}
	l.maps, l.files, l.state, l.record = cfg.Dirs.Maps, cfg.Dirs.Files, cfg.HAProxy.StateDir, cfg.HAProxy.RecordDir
	if l.state == "" {
		l.state = filepath.Join(filepath.Dir(l.config), generation.DefaultStateDirName)
	}
	if l.state, err = filepath.Abs(l.state); err != nil {
		return l, err
	}
	_, statErr := os.Lstat(l.config)
	l.expectRunning = statErr == nil && cfg.HAProxy.Reload == "master-socket"
	if err := notTakingOver(cfg, l, statErr == nil); err != nil {
		return l, err
	}
	return l, nil
}

// notTakingOver refuses to start when the file source's directory does not exist and the
// sidecar would take over a configuration file nobody named: --haproxy-config left at its
// default, a file there, and no state directory of the sidecar's beside it. A mistyped --dir
// must not turn a machine's own /etc/haproxy/haproxy.cfg into a symlink to the sidecar's copy.
func notTakingOver(cfg *config.Run, l local, configExists bool) error {
	if cfg.Source.Kind != "file" || cfg.HAProxy.Config != "" || !configExists {
		return nil
	}
	if _, err := os.Stat(cfg.Source.Dir); !os.IsNotExist(err) {
		return nil
	}
	if _, err := os.Stat(l.state); err == nil {
		return nil // the sidecar's own already: it waits for its source
	}
	return fmt.Errorf("the source directory %s does not exist: not taking over %s, which --haproxy-config did not name (create the directory, or pass --haproxy-config %s to have the sidecar manage that file)",
		cfg.Source.Dir, l.config, l.config)
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

// haproxy is how the pipeline reaches HAProxy: what renders for it, what reloads it, its
// runtime API.
type haproxy struct {
	renderer candidate.Renderer
	reloader reload.Reloader
	endpoint string         // names the reload target in metrics and logs
	runtime  apply.Runtime  // nil: every change reloads
	dp       *dataplaneMode // --reload=dataplane
}

// newHAProxy connects to HAProxy as the configuration says. recorder is read when a remote
// host reports, so that it can be set after this returns.
func newHAProxy(ctx context.Context, cfg *config.Run, l local, store *generation.Store, metrics *status.Metrics, recorder *apply.Recorder, log *slog.Logger, red *redactor) (*haproxy, error) {
	h := cfg.HAProxy
	if h.Remote() {
		dp, err := startDataplane(ctx, cfg, store, metrics, recorder, log, red)
		if err != nil {
			return nil, err
		}
		return &haproxy{renderer: dp, reloader: dp, endpoint: "dataplane", dp: dp}, nil
	}
	ro := cfg.Render.Options(l.ssl)
	ro.MapsDir, ro.FilesDir = store.MapsDir(), store.FilesDir()
	out := &haproxy{renderer: render.New(ro), endpoint: h.Reload, runtime: newRuntime(h, l.ssl, store.MapsDir(), log)}
	switch h.Reload {
	case "master-socket":
		out.reloader = &reload.MasterSocket{Path: h.MasterSocket, Timeout: h.ReloadTimeout}
	case "command":
		out.reloader = &reload.Command{Argv: []string{"sh", "-c", h.ReloadCommand}}
	default:
		out.reloader = reload.None{}
	}
	return out, nil
}

// onChange sets what asks the pipeline to render again (a learned remote directory).
func (h *haproxy) onChange(fn func()) {
	if h.dp != nil {
		h.dp.onChange(fn)
	}
}

func (h *haproxy) close() {
	if h.dp != nil {
		h.dp.Close()
	}
}

// newRuntime returns the runtime API updater, nil when runtime updates are off: --runtime-api
// is false, HAProxy is remote (--reload=dataplane), or no socket reaches the local worker.
func newRuntime(h config.HAProxy, sslDir, mapsDir string, log *slog.Logger) apply.Runtime {
	if !h.RuntimeAPI || h.Remote() {
		return nil
	}
	opts := runtimeapi.Options{SSLDir: sslDir, MapsDir: mapsDir, Logger: log.With("component", "runtime-api")}
	switch {
	case h.RuntimeSocket != "":
		opts.Client = &runtimeapi.Socket{Path: h.RuntimeSocket}
		if h.Reload == "master-socket" {
			// While the configuration declares no stats socket there (a template of one's own).
			opts.Master = &runtimeapi.Socket{Path: h.MasterSocket}
		}
	case h.Reload == "master-socket":
		opts.Client, opts.Prefix = &runtimeapi.Socket{Path: h.MasterSocket}, "@1 "
	default:
		return nil
	}
	return runtimeapi.New(opts)
}

// newChecker is haproxy -c, and in servers mode whether the server model can hold the
// servers (serversChecker); nil when validation is off.
func newChecker(cfg *config.Run) (candidate.Checker, error) {
	r := cfg.Render
	if !r.Validate {
		return nil, nil
	}
	if !validate.Available(r.HAProxyBin) {
		return nil, fmt.Errorf("--validate is on but %q is not found; install HAProxy or pass --haproxy-bin (or --validate=false)", r.HAProxyBin)
	}
	if serversMode(cfg) {
		return serversChecker{haproxy: validate.Checker{Binary: r.HAProxyBin}, backends: cfg.Dataplane.Backends}, nil
	}
	return validate.Checker{Binary: r.HAProxyBin}, nil
}

// watchOldWorkers exports haproxy_sidecar_old_workers, read from the master's show proc at
// each scrape, when the sidecar reloads through the master socket.
func watchOldWorkers(h config.HAProxy, m *status.Metrics) {
	if h.Reload != "master-socket" {
		return
	}
	master := &reload.MasterSocket{Path: h.MasterSocket, Timeout: 2 * time.Second}
	m.Registry.MustRegister(status.NewOldWorkers(func(ctx context.Context) (int, error) {
		p, err := master.ShowProc(ctx)
		return p.OldWorkers, err
	}))
}
