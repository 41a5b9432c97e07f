package sidecar

import (
	"context"
	"log/slog"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/admission"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/pipeline"
)

// startWebhook serves the admission webhook when --webhook-addr asks: it evaluates a change
// with the running sidecar's objects, renderer and good inputs, staged apart from what HAProxy
// reads. stop removes the staging directory.
func startWebhook(ctx context.Context, cfg *config.Run, src pipeline.Source, rend candidate.Renderer, good func() quarantine.State,
	dirs generation.ExportPaths, log *slog.Logger, red *redactor) (stop func(), err error) {
	if cfg.Webhook.Addr == "" {
		return func() {}, nil
	}
	peers, err := peersOptions(cfg.Peers, cfg.Inputs.Namespace, cfg.Source)
	if err != nil {
		return nil, err
	}
	eval, cleanup, err := webhookEvaluator(cfg.Inputs, peers, cfg.Render, dirs, rend, src.Objects, good)
	if err != nil {
		return nil, err
	}
	log = log.With("component", "webhook")
	if err := admission.Serve(ctx, cfg.Webhook.Addr, cfg.Webhook.CertDir, &admission.Handler{Eval: eval, Timeout: cfg.Webhook.Timeout, Log: log, Redact: red.String}, log); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// webhookEvaluator evaluates changes with objects and good as the sidecar would take them,
// rendering with rend (nil: a renderer of its own), staged in a temporary directory that
// cleanup removes.
func webhookEvaluator(in config.Inputs, peers snapshot.PeersOptions, r config.Render, dirs generation.ExportPaths, rend candidate.Renderer,
	objects func(context.Context) (*snapshot.Objects, error), good func() quarantine.State) (*admission.Inputs, func(), error) {
	build, cleanup, err := stagingBuilderWith(in, peers, r, dirs, rend)
	if err != nil {
		return nil, nil, err
	}
	return admission.NewInputs(admission.Config{Objects: objects, Good: good, Decode: manifests(in), Build: build}), cleanup, nil
}
