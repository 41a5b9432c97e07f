package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/serversync"
)

// Modes of Config.Mode.
const (
	// ModeConfig pushes the whole rendered configuration, its certificates and files.
	ModeConfig = "config"
	// ModeServers manages only the servers (and default-server parameters) of backends of
	// hosts someone else configures; the rest of their configuration is left as it is.
	ModeServers = "servers"
)

// With Config.Mode ModeServers, Reload syncs servers instead of pushing the configuration:
//
//  1. the backends to manage are read from the live rendering (serversync.FromConfig): those
//     of Config.Backends, or every backend section; their server lines and their own
//     default-server lines are what the hosts should have;
//  2. per host: read the configuration version, then each managed backend (its model, for its
//     default_server) and its servers; serversync.Decide makes the plan;
//  3. changes go in one transaction (start at the version read, add, replace and delete
//     servers, set default_server, commit), which reloads once; the reload is followed like a
//     configuration push. The configuration moving meanwhile (409 at the start or the commit,
//     406 for a transaction another commit made outdated) starts over from step 2 on the fresh
//     version, at most MaxConflicts times;
//  4. when servers' states (the `disabled` keyword) are all that changed, they are set through
//     the runtime server endpoints: no transaction, no reload.
//
// A reload that fails after a commit is undone by a transaction that puts back what the host
// had, so that its stored configuration is what HAProxy runs. Backends the host does not have
// are not created: the host is reported as failing (and retried) until someone creates them;
// the other backends are synced meanwhile. Certificates, map files and other files are not
// pushed. The outcome rule of Reload (at least one host: success, retrying the others; every
// host refused: *reload.Failed; none reached: an error) is the same as in ModeConfig.

// serversDone is what one sync of a host did.
type serversDone struct {
	ops, states int
	reloadID    string
}

// reloadServers is Reload in ModeServers.
func (r *Reloader) reloadServers(ctx context.Context) error {
	config, err := os.ReadFile(r.cfg.ConfigPath)
	if err != nil {
		return fmt.Errorf("dataplane: read the live configuration: %w", err)
	}
	want, err := serversync.FromConfig(config, r.cfg.Backends)
	if err != nil {
		// The sidecar checks this with haproxy -c: only a rendering that skipped the check
		// (--validate=false) gets here.
		return &reload.Failed{Output: "the servers cannot be written through the Data Plane API: " + err.Error()}
	}
	if err := r.tr.refresh(); err != nil {
		r.log.Warn("re-read the Data Plane API TLS files", "error", err)
	}
	results := make([]error, len(r.hosts))
	r.each(ctx, func(ctx context.Context, i int, h *host) {
		results[i] = r.serversAttempt(ctx, h, want, false)
	})
	var applied int
	var rejections, errs []error
	var failing []*host
	for i, err := range results {
		var rej *Rejection
		switch {
		case err == nil:
			applied++
		case errors.As(err, &rej):
			rejections = append(rejections, err)
			failing = append(failing, r.hosts[i])
		default:
			errs = append(errs, err)
			failing = append(failing, r.hosts[i])
		}
	}
	switch {
	case applied > 0:
		if len(failing) > 0 && ctx.Err() == nil {
			r.retryServers(failing, want)
		}
		return nil
	case len(rejections) > 0:
		var reasons []string
		for _, e := range rejections {
			reasons = append(reasons, e.Error())
		}
		for _, e := range errs {
			reasons = append(reasons, "not reached: "+e.Error())
		}
		return &reload.Failed{Output: strings.Join(reasons, "\n")}
	}
	return fmt.Errorf("dataplane: no host could be updated: %w", errors.Join(errs...))
}

// serversAttempt syncs one host, logs and reports the outcome.
func (r *Reloader) serversAttempt(ctx context.Context, h *host, want []serversync.Backend, background bool) error {
	start := time.Now()
	done, err := r.syncServers(ctx, h, want)
	log := r.log.With("endpoint", h.c.label, "took", time.Since(start).Round(time.Millisecond))
	if background {
		h.mu.Lock()
		h.retryCount++
		log = log.With("retry", h.retryCount)
		h.mu.Unlock()
	}
	var rej *Rejection
	switch {
	case err == nil && done.ops == 0 && done.states == 0:
		log.Debug("the host's servers are as rendered; nothing sent")
	case err == nil:
		log.Info("servers synced through the Data Plane API", "changes", done.ops, "runtime_states", done.states, "reload_id", done.reloadID)
		r.report(h, ResultSuccess)
	case errors.Is(err, context.Canceled):
		log.Debug("update cancelled", "error", err)
	case errors.As(err, &rej):
		log.Error("the Data Plane API refused the servers' change; the host keeps its previous servers", "error", err)
		r.report(h, ResultFailed)
	default:
		log.Error("could not sync the host's servers through the Data Plane API", "error", err)
		r.report(h, ResultError)
	}
	return err
}

// retryServers keeps syncing the failing hosts with backoff until each has want, or the next
// Reload (or Close) cancels.
func (r *Reloader) retryServers(hosts []*host, want []serversync.Backend) {
	r.retryHosts(context.Background(), hosts, func(ctx context.Context, h *host) error {
		return r.serversAttempt(ctx, h, want, true)
	})
}

// syncServers brings one host's managed backends to want.
func (r *Reloader) syncServers(ctx context.Context, h *host, want []serversync.Backend) (serversDone, error) {
	c := h.c
	h.mu.Lock()
	previous := h.synced
	h.synced = nil // unknown until this sync is done
	h.mu.Unlock()
	for attempt := 0; ; attempt++ {
		version, err := c.Version(ctx)
		if err != nil {
			return serversDone{}, err
		}
		has, models, err := readServers(ctx, c, want)
		if err != nil {
			return serversDone{}, err
		}
		plan := serversync.Decide(want, has, previous)
		done := serversDone{ops: len(plan.Ops), states: len(plan.States)}
		if len(plan.Ops) > 0 {
			done.reloadID, err = r.transact(ctx, c, version, plan.Ops, models)
			if errors.Is(err, errConflict) && attempt < r.cfg.MaxConflicts {
				r.log.Debug("the host's configuration moved under us; syncing again on the fresh version", "endpoint", c.label, "version", version, "attempt", attempt+1, "error", err)
				continue
			}
			if err != nil {
				return done, err
			}
			if done.reloadID != "" {
				if err := c.WaitReload(ctx, done.reloadID); err != nil {
					var rej *Rejection
					if errors.As(err, &rej) {
						rej.reloaded = true
						r.putBack(ctx, c, want, has, models)
					}
					return done, err
				}
			}
		}
		for _, st := range plan.States {
			if err := c.SetServerState(ctx, st.Backend, st.Server, st.State); err != nil {
				return done, err
			}
		}
		synced := make([]serversync.Backend, 0, len(want))
		for _, b := range want {
			if _, ok := has[b.Name]; ok {
				synced = append(synced, b)
			}
		}
		h.mu.Lock()
		h.synced = synced
		h.mu.Unlock()
		if len(plan.Missing) > 0 {
			return done, fmt.Errorf("%s: the host has no backend %s: --dataplane-mode=servers manages the servers of the backends a host has and creates none",
				c.label, strings.Join(plan.Missing, ", "))
		}
		return done, nil
	}
}

// readServers reads what the host's configuration has of the backends of want: the plan's
// input, and each backend's model (sent back whole when its default_server changes).
func readServers(ctx context.Context, c *client, want []serversync.Backend) (serversync.Host, map[string]map[string]any, error) {
	has := serversync.Host{}
	models := map[string]map[string]any{}
	for _, b := range want {
		m, found, err := c.Backend(ctx, b.Name)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			continue
		}
		list, err := c.Servers(ctx, b.Name)
		if err != nil {
			return nil, nil, err
		}
		var hb serversync.HostBackend
		if ds, ok := m["default_server"].(map[string]any); ok {
			hb.DefaultServer = serversync.ParamsFromJSON(ds)
		}
		for _, sm := range list {
			s, err := serversync.ServerFromJSON(sm)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: backend %s: %w", c.label, b.Name, err)
			}
			hb.Servers = append(hb.Servers, s)
		}
		has[b.Name], models[b.Name] = hb, m
	}
	return has, models, nil
}

// transact carries ops out in one transaction started at version and commits it: the
// Reload-Id to follow. A transaction not committed is deleted.
func (r *Reloader) transact(ctx context.Context, c *client, version int64, ops []serversync.Op, models map[string]map[string]any) (string, error) {
	id, err := c.StartTransaction(ctx, version)
	if err != nil {
		return "", err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if err := c.DeleteTransaction(context.WithoutCancel(ctx), id); err != nil {
			r.log.Debug("delete a transaction not committed", "endpoint", c.label, "transaction", id, "error", err)
		}
	}()
	for _, op := range ops {
		var err error
		switch op.Action {
		case serversync.SetDefaultServer:
			m := maps.Clone(models[op.Backend])
			if len(op.DefaultServer) == 0 {
				delete(m, "default_server")
			} else {
				m["default_server"] = op.DefaultServer.JSON()
			}
			err = c.ReplaceBackend(ctx, id, op.Backend, m)
		case serversync.AddServer:
			err = c.CreateServer(ctx, id, op.Backend, op.Server.JSON())
		case serversync.ReplaceServer:
			err = c.ReplaceServer(ctx, id, op.Backend, op.Server.JSON())
		case serversync.DeleteServer:
			err = c.DeleteServer(ctx, id, op.Backend, op.Server.Name)
		}
		if err != nil {
			return "", err
		}
	}
	reloadID, err := c.CommitTransaction(ctx, id)
	committed = err == nil
	return reloadID, err
}

// putBack undoes a change whose reload failed: HAProxy kept the previous servers while the API
// stored the new ones; a transaction stores what the host had (has) again, so that what the
// API holds is what runs (and what a restart of the host would load).
func (r *Reloader) putBack(ctx context.Context, c *client, want []serversync.Backend, has serversync.Host, models map[string]map[string]any) {
	var old []serversync.Backend
	for _, b := range want {
		hb, ok := has[b.Name]
		if !ok {
			continue
		}
		ds := hb.DefaultServer
		if ds == nil {
			ds = serversync.Params{}
		}
		old = append(old, serversync.Backend{Name: b.Name, DefaultServer: ds, Servers: hb.Servers})
	}
	err := func() error {
		version, err := c.Version(ctx)
		if err != nil {
			return err
		}
		now, _, err := readServers(ctx, c, old)
		if err != nil {
			return err
		}
		plan := serversync.Decide(old, now, nil)
		if len(plan.Ops) == 0 {
			return nil
		}
		id, err := r.transact(ctx, c, version, plan.Ops, models)
		if err != nil || id == "" {
			return err
		}
		return c.WaitReload(ctx, id)
	}()
	if err != nil {
		r.log.Warn("could not store the previous servers again in the Data Plane API after the failed reload", "endpoint", c.label, "error", err)
	}
}
