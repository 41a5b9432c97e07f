package config

import (
	"errors"
	"flag"
	"time"
)

// Webhook is the admission webhook: the API server asks the sidecar, before it stores a change
// of an input, whether the change would be held back.
type Webhook struct {
	Addr    string // "": off
	CertDir string
	Timeout time.Duration
}

func (*Webhook) title() string { return "Admission webhook" }

func (w *Webhook) register(fs *flag.FlagSet) {
	fs.StringVar(&w.Addr, "webhook-addr", "", "address of the validating admission webhook (https://ADDR/validate): a change of the services or config ConfigMap, a certificate or a watched object that would be held back is refused at kubectl apply, naming the key and line; empty: off")
	fs.StringVar(&w.CertDir, "webhook-cert-dir", "/var/run/haproxy-sidecar/webhook", "directory of the webhook's TLS certificate (tls.crt, tls.key), read again when it changes")
	fs.DurationVar(&w.Timeout, "webhook-timeout", 8*time.Second, "time one admission review may take; past it the change is allowed with a warning (the API server gives a webhook at most 10s)")
}

func (w *Webhook) validate() error {
	switch {
	case w.Addr != "" && w.CertDir == "":
		return errors.New("--webhook-addr needs --webhook-cert-dir")
	case w.Timeout <= 0 || w.Timeout > 10*time.Second:
		return errors.New("--webhook-timeout: want more than 0 and at most 10s (the API server's limit)")
	}
	return nil
}
