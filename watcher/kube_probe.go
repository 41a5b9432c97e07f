package watcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// How the kube source probes the API server: every kubeProbeEvery while it answers (an outage
// is reported within kubeProbeEvery+kubeProbeTimeout, under the 5 s an operator may wait),
// every kubeProbeRetry while it does not (its return is seen at once, within the 2 s in which
// what changed meanwhile must go live).
const (
	kubeProbeEvery   = time.Second
	kubeProbeRetry   = 250 * time.Millisecond
	kubeProbeTimeout = 2 * time.Second
)

// follow probes the API server until ctx ends and reports whether it answers. client-go's
// informers say nothing of an outage and, once it has lasted, wait up to a minute between
// attempts: so an outage is found by the probe (or a failed list or watch, which probes at
// once), and when the API server answers again after failing more than one probe the
// informers are started afresh, listing at once; only then is the source reported up. After
// a single failed probe (a blip, or an API server too slow once) they are left alone: a
// restart lists everything again, and client-go's first retry comes within 1.6 s anyway.
func (k *Kube) follow(ctx context.Context) {
	failures := 0
	for first := true; ; first = false {
		next := kubeProbeEvery
		if failures > 0 {
			next = kubeProbeRetry
		}
		if !first && !k.pause(ctx, next) {
			return
		}
		err := k.probe(ctx, failures == 0)
		if err == nil && failures > 1 {
			err = k.restart(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
		} else {
			failures = 0
		}
		k.report(err)
	}
}

// pause waits d, or less when a list or watch failed (probeNow); false when ctx ended.
func (k *Kube) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-k.poke:
	}
	return true
}

// probe lists one ConfigMap of the namespace (what the source may read anyway): nil when the
// API server answers, whatever it says (a refusal, RBAC, is reported where it matters). With
// retry, client-go retries a dropped connection within the timeout (a blip is no outage);
// without, the first failure is the answer (while the API server is down: its return is seen
// at the next probe, not after client-go's one-second retry delay).
func (k *Kube) probe(ctx context.Context, retry bool) error {
	ctx, cancel := context.WithTimeout(ctx, kubeProbeTimeout)
	defer cancel()
	var err error
	if rc, ok := k.Client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil && !retry {
		err = rc.Get().Namespace(k.Namespace).Resource("configmaps").Param("limit", "1").MaxRetries(0).Do(ctx).Error()
	} else {
		_, err = k.Client.CoreV1().ConfigMaps(k.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	}
	if err == nil || answered(err) {
		return nil
	}
	return fmt.Errorf("kube source: cannot reach the API server %s: %w", k.Server, err)
}

// answered: err is an answer of the API server that says it works (not a 5xx: an API server
// that cannot reach etcd answers 500 or 504, and has nothing new to say).
func answered(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st) && st.Status().Code > 0 && st.Status().Code < 500
}

// restart starts the informers afresh and, once they have listed, makes them the ones Objects
// reads (the old ones are stopped); an error when the API server stops answering meanwhile.
func (k *Kube) restart(ctx context.Context) error {
	next, err := k.newInformerSet(ctx)
	if err != nil {
		return fmt.Errorf("kube source: start the informers again: %w", err)
	}
	k.mu.Lock()
	for ns := range k.cur.podNS {
		k.watchPods(next, ns)
	}
	k.mu.Unlock()
	next.start()
	if err := k.awaitSet(ctx, next); err != nil {
		k.shutdown(next)
		return err
	}
	k.mu.Lock()
	old := k.cur
	k.cur = next
	k.mu.Unlock()
	k.shutdown(old)
	k.notify()
	return nil
}

// awaitSet waits until the informers of set have listed; an error when the API server stops
// answering meanwhile (probed every kubeProbeEvery) or ctx ends.
func (k *Kube) awaitSet(ctx context.Context, set *informerSet) error {
	tick := time.NewTicker(resourcePoll)
	defer tick.Stop()
	probed := time.Now()
	for {
		k.mu.Lock()
		done := set.listed()
		k.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Since(probed) >= kubeProbeEvery {
			if err := k.probe(ctx, true); err != nil {
				return err
			}
			probed = time.Now()
		}
	}
}

// report tells OnState and the log whether the API server answers (why nil) or not.
func (k *Kube) report(why error) {
	k.state.set(why == nil, why,
		"kube source: cannot reach the API server; HAProxy keeps serving what it runs, and the objects last read (if any) stay in use",
		"kube source: the API server answers again; its objects were listed afresh", "namespace", k.Namespace)
}
