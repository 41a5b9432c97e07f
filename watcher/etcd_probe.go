package watcher

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// How the etcd source probes etcd: every etcdProbeEvery while it answers (an outage is
// reported within etcdProbeEvery+etcdProbeTimeout, under the 5 s an operator may wait), every
// etcdProbeRetry while it does not (its return is seen at once, within the 2 s in which what
// changed meanwhile must go live). etcdReconnectMax bounds the etcd client's wait between
// attempts to reconnect, for the same reason.
const (
	etcdProbeEvery   = time.Second
	etcdProbeRetry   = 250 * time.Millisecond
	etcdProbeTimeout = 2 * time.Second
	etcdReconnectMax = 250 * time.Millisecond
)

// probe reads the services ConfigMap's key (its count only: a linearizable read, which needs
// a leader) until ctx ends. The watches say nothing of an outage (the client resumes them
// silently once it reconnects, and the watchdog takes two of its intervals to find them
// stalled), so the probe reports it (reportUp); when etcd answers again, the watches waiting
// to list again are woken (their backoff may have grown to MaxBackoff).
func (e *Etcd) probe(ctx context.Context) {
	defer e.wg.Done()
	key := configMapKind.keyPrefix(e.cfg.Prefix, e.cfg.Namespace) + e.cfg.ServicesConfigMap
	down := false
	for first := true; ; first = false {
		d := etcdProbeEvery
		if down {
			d = etcdProbeRetry
		}
		if !first && !sleep(ctx, d) {
			return
		}
		pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), etcdProbeTimeout)
		_, err := e.cli.Get(pctx, key, clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			err = fmt.Errorf("etcd does not answer: %w", err)
		}
		e.mu.Lock()
		e.probeErr = err
		if down && err == nil {
			close(e.back)
			e.back = make(chan struct{})
		}
		e.mu.Unlock()
		if err != nil || down {
			e.reportUp() // up only once the lists succeed, as before: they report it
		}
		down = err != nil
	}
}

// pause waits d before a watch lists again, or less when etcd answers again after an outage
// (bo then starts over); false when ctx ended.
func (e *Etcd) pause(ctx context.Context, d time.Duration, bo *backoff) bool {
	e.mu.Lock()
	back := e.back
	e.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-back:
		bo.reset()
	}
	return true
}
