package config

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// DefaultHAProxyConfig is --haproxy-config when none is given (not with --reload=dataplane).
const DefaultHAProxyConfig = "/etc/haproxy/haproxy.cfg"

// HAProxy is the local HAProxy: the files it reads, how it is reloaded and probed, and its
// runtime API.
type HAProxy struct {
	Config   string // --haproxy-config
	StateDir string
	// RecordDir keeps the record of what HAProxy runs ("": StateDir).
	RecordDir     string
	Reload        string // master-socket, dataplane, command or none
	MasterSocket  string
	ReloadCommand string
	ReloadTimeout time.Duration
	ProbeInterval time.Duration
	// RuntimeAPI makes the changes it can through the runtime API (RuntimeSocket, else the
	// master socket), with no reload.
	RuntimeAPI    bool
	RuntimeSocket string
	// CheckBeforeRuntime validates an operator's change with haproxy -c before the runtime
	// API makes it live (false: right after, as pod changes are; taken back if refused).
	CheckBeforeRuntime bool
	MinReloadInterval  time.Duration
}

func (*HAProxy) title() string { return "HAProxy: files, reloads, runtime API" }

func (h *HAProxy) register(fs *flag.FlagSet) {
	fs.StringVar(&h.Config, "haproxy-config", "", "the file HAProxy was started with (-f), default "+DefaultHAProxyConfig+"; made a symlink into the live generation (an existing file is kept as the adopted generation); not used with --reload=dataplane")
	fs.StringVar(&h.StateDir, "state-dir", "", "where generations are kept (default DIR(--haproxy-config)/.haproxy-sidecar; with --reload=dataplane, where everything local is kept: default $XDG_STATE_HOME/haproxy-sidecar/dataplane, else ~/.local/state/haproxy-sidecar/dataplane)")
	fs.StringVar(&h.RecordDir, "record-dir", "", "where the record of what HAProxy runs is kept, which lets a restarted sidecar leave a running HAProxy alone (default --state-dir); a directory that lives as long as HAProxy, in memory (the chart: the volume of HAProxy's sockets), keeps the record's removal before each runtime API change off a busy disk")
	choiceVar(fs, &h.Reload, "reload", "master-socket", []string{"master-socket", "dataplane", "command", "none"}, "how to reload HAProxy: master-socket, dataplane (the HAProxy Data Plane API of remote hosts), command or none")
	fs.StringVar(&h.MasterSocket, "master-socket", "/var/run/haproxy/master.sock", "HAProxy master CLI socket (haproxy -W -S PATH,level,admin)")
	fs.StringVar(&h.ReloadCommand, "reload-command", "", "with --reload=command: command run through sh -c to reload HAProxy; exit 0 means loaded")
	fs.DurationVar(&h.ReloadTimeout, "reload-timeout", 30*time.Second, "how long a reload may take to be confirmed")
	fs.DurationVar(&h.ProbeInterval, "probe-interval", 2*time.Second, "how often HAProxy is asked (master socket) whether it runs: haproxy_sidecar_haproxy_up, /readyz 503 while it is down, and the live configuration made sure of when it comes back")
	fs.BoolVar(&h.RuntimeAPI, "runtime-api", true, "make server changes (added, removed, address, weight, disabled), certificate file changes and map file contents through HAProxy's runtime API, with no reload, when nothing else changed (docs/runtime-api.md); off: every change reloads")
	fs.BoolVar(&h.CheckBeforeRuntime, "check-before-runtime", false, "validate an operator's change (a services key, a certificate) with haproxy -c before the runtime API makes it live; by default it goes live at once, as a pod change does, is checked right after and taken back and held if haproxy -c refuses it (a changed template set is always checked first)")
	fs.StringVar(&h.RuntimeSocket, "runtime-socket", "", "HAProxy stats socket (level admin) for the runtime API, which spares its commands the master's relay to the worker; while nothing listens there (the configuration declares no `stats socket PATH level admin`), the master socket with @1, as by default")
	fs.DurationVar(&h.MinReloadInterval, "min-reload-interval", 0, "least time between two reloads: a reload asked sooner waits, then loads the latest rendering (server, certificate and map changes still go live at once through the runtime API); 0: no minimum")
}

func (h *HAProxy) validate() error {
	switch h.Reload {
	case "master-socket", "dataplane", "none":
	case "command":
		if h.ReloadCommand == "" {
			return errors.New("--reload=command needs --reload-command")
		}
	default:
		return fmt.Errorf("--reload %q: want master-socket, dataplane, command or none", h.Reload)
	}
	return nil
}

// Remote is set when HAProxy is reached through the Data Plane API.
func (h *HAProxy) Remote() bool { return h.Reload == "dataplane" }
