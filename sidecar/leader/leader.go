// Package leader runs leader election among the sidecar's replicas through a Kubernetes Lease:
// only the leader applies; the others render and validate as hot standbys.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Options configure an election.
type Options struct {
	Namespace, Name string // the Lease
	Identity        string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	// OnLeading is called when this instance starts leading.
	OnLeading func()
}

// Election says whether this instance leads; the zero Election stands by until Start wins the
// lease.
type Election struct {
	leading atomic.Bool
}

// Standby reports whether this instance must not apply (it does not lead).
func (e *Election) Standby() bool { return !e.leading.Load() }

// Start campaigns for the lease until ctx ends or stop is called, again after losing it. stop
// returns once the campaign has (the lease released, its last words logged).
func (e *Election) Start(ctx context.Context, client kubernetes.Interface, o Options, log *slog.Logger) (stop func(), _ error) {
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
		},
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				log.Info("leading: applying from now on", "identity", o.Identity)
				e.leading.Store(true)
				if o.OnLeading != nil {
					o.OnLeading()
				}
			},
			OnStoppedLeading: func() {
				log.Info("no longer leading: standby", "identity", o.Identity)
				e.leading.Store(false)
			},
			OnNewLeader: func(id string) { log.Info("leader", "identity", id) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			le.Run(ctx)
		}
	}()
	return func() { cancel(); <-done }, nil
}
