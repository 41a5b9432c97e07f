package sidecar

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// redactor knows the secret values the configuration gives: the stats password, the Data
// Plane API credentials, the etcd password, the environment values marked secret.
// Certificate keys are added as they are read (the pipeline).
type redactor struct {
	*redact.Redactor
	mu   sync.Mutex
	last map[string]string // per group: the value onChange registered last
}

func newRedactor(in config.Inputs, etcd config.Etcd, dp *config.Dataplane) *redactor {
	r := &redactor{Redactor: &redact.Redactor{}, last: map[string]string{}}
	r.Set("stats", in.StatsPassword)
	secrets := []string{dp.Password, dp.Token}
	if dp.PasswordFile != "" {
		if b, err := os.ReadFile(dp.PasswordFile); err == nil {
			secrets = append(secrets, strings.TrimSpace(string(b)))
		}
	}
	r.Set("dataplane", secrets...)
	r.Set("env", in.SecretEnv()...)
	r.Set("etcd", etcd.Password)
	return r
}

// onChange returns a function that registers a secret value of group whenever it changes (a
// password file re-read at each request, say).
func (r *redactor) onChange(group string) func(string) {
	return func(v string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if v != r.last[group] {
			r.last[group] = v
			r.Set(group, v)
		}
	}
}

// newLogger logs to w as l says, with every secret red knows redacted, durations in seconds
// in JSON, and the trace and span ids of the lines logged during a traced sync.
func newLogger(l config.Log, w io.Writer, red *redactor) (*slog.Logger, error) {
	var opts slog.HandlerOptions
	if l.Format == "json" {
		opts.ReplaceAttr = durationSeconds
	}
	h, err := l.Handler(w, opts)
	if err != nil {
		return nil, err
	}
	return slog.New(red.Handler(tracing.LogHandler(h))), nil
}

// durationSeconds prints a duration as seconds, a number log pipelines can compute with (slog's
// JSON handler prints nanoseconds); the text handler keeps Go's "1.2s".
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}

// warnWeakSecrets says which configured secrets would mask ordinary text as well (a short one,
// or a word the sidecar's own messages use): every occurrence is masked in logs, /readyz and
// Events, so a weak one makes messages unreadable.
func warnWeakSecrets(log *slog.Logger, in config.Inputs, etcd config.Etcd, dp *config.Dataplane) {
	named := []struct{ what, value string }{{"--statistics-password", in.StatsPassword}, {"--etcd-password", etcd.Password},
		{"--dataplane-password", dp.Password}, {"--dataplane-token", dp.Token}}
	for name, v := range config.AllowedEnv(in.EnvSecret, os.Environ()) {
		named = append(named, struct{ what, value string }{"--env-secret " + name, v})
	}
	for _, n := range named {
		if why := redact.Weak(n.value); why != "" {
			log.Warn("a secret would mask ordinary text in every log line, /readyz answer and Event: "+why+"; choose a longer one", "secret", n.what)
		}
	}
}
