package sidecar

import (
	"context"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/objstatus"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// startObjectStatus writes the status of the objects the live configuration serves (package
// objstatus) until ctx ends, with --source=kube: as the leader only (standby, with
// --leader-elect), and with --reload=dataplane once every host has the configuration. The
// returned function stops it, and returns once it stopped. Without the Kubernetes source
// (kube nil) there is nothing to write.
func startObjectStatus(ctx context.Context, cfg *config.Run, kube *watcher.Kube, state func() live.State, standby func() bool, h *haproxy, events apply.Recorder, log *slog.Logger) (stop func(), err error) {
	if kube == nil {
		return func() {}, nil
	}
	c := objstatus.Config{
		Client: kube.Client, Dynamic: kube.Dynamic, Live: state, Standby: standby,
		Namespace: cfg.Inputs.Namespace, ServicesConfigMap: cfg.Inputs.ServicesConfigMap,
		PublishService: cfg.Publish.Service, PublishAddresses: cfg.Publish.Addresses,
		ControllerName: cfg.Publish.ControllerName, Logger: log,
	}
	// The Kubernetes Events recorder warns on the objects the templates warn about.
	if ev, ok := events.(interface {
		Warn(obj runtime.Object, reason, message string)
	}); ok {
		c.Warn = ev.Warn
	}
	if h.dp != nil {
		c.HostsHave = h.dp.HostsHave
	}
	w, err := objstatus.New(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}
