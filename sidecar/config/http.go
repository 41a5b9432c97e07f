package config

import (
	"errors"
	"flag"
	"time"
)

// HTTP is what the sidecar serves: metrics, health and Go's profiles.
type HTTP struct {
	MetricsAddr string
	HealthAddr  string
	Profiles    bool
	// ShutdownDelay is how long the sidecar keeps going once asked to stop, /readyz answering
	// 503 meanwhile: the time load balancers take to stop sending new connections to the pod
	// while HAProxy still serves them (docs/kubernetes.md#draining).
	ShutdownDelay time.Duration
}

func (*HTTP) title() string { return "HTTP: metrics, health, profiles" }

func (h *HTTP) register(fs *flag.FlagSet) {
	fs.StringVar(&h.MetricsAddr, "metrics-addr", ":9090", "address of /metrics (Prometheus); empty: off")
	fs.StringVar(&h.HealthAddr, "health-addr", ":8080", "address of /healthz and /readyz; empty: off")
	fs.BoolVar(&h.Profiles, "pprof", false, "also serve Go's profiles (/debug/pprof/) on --metrics-addr, to see where memory and CPU go")
	fs.DurationVar(&h.ShutdownDelay, "shutdown-delay", 0, "once asked to stop (SIGTERM, SIGINT, SIGUSR1), /readyz answers 503 at once and the sidecar keeps HAProxy configured this long before it stops, while load balancers stop sending to the pod (a second signal stops it at once); 0: stop at once")
}

func (h *HTTP) validate() error {
	if h.ShutdownDelay < 0 {
		return errors.New("--shutdown-delay must not be negative")
	}
	return nil
}
