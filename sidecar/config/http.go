package config

import "flag"

// HTTP is what the sidecar serves: metrics, health and Go's profiles.
type HTTP struct {
	MetricsAddr string
	HealthAddr  string
	Profiles    bool
}

func (*HTTP) title() string { return "HTTP: metrics, health, profiles" }

func (h *HTTP) register(fs *flag.FlagSet) {
	fs.StringVar(&h.MetricsAddr, "metrics-addr", ":9090", "address of /metrics (Prometheus); empty: off")
	fs.StringVar(&h.HealthAddr, "health-addr", ":8080", "address of /healthz and /readyz; empty: off")
	fs.BoolVar(&h.Profiles, "pprof", false, "also serve Go's profiles (/debug/pprof/) on --metrics-addr, to see where memory and CPU go")
}

func (h *HTTP) validate() error { return nil }
