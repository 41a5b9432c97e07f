package config

import (
	"flag"
	"time"
)

// Leader is leader election among replicas (--source=kube): only the leader applies.
type Leader struct {
	Elect         bool
	Namespace     string // "": --namespace
	Name          string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// PodName is this instance's name: Events' host and the election identity ("": the host
	// name).
	PodName string
}

func (*Leader) title() string { return "Leader election (--source=kube)" }

func (l *Leader) register(fs *flag.FlagSet) {
	fs.StringVar(&l.PodName, "pod-name", "", "this instance's name: Events' host and the leader-election identity (default: the host name)")
	fs.BoolVar(&l.Elect, "leader-elect", false, "with --source=kube: only the leader applies; others render and validate as hot standbys (for one controller pushing to remote HAProxy hosts)")
	fs.StringVar(&l.Namespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default --namespace)")
	fs.StringVar(&l.Name, "leader-election-id", "haproxy-sidecar", "name of the leader-election Lease")
	fs.DurationVar(&l.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal")
	fs.DurationVar(&l.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it steps down")
	fs.DurationVar(&l.RetryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
}

func (l *Leader) validate() error { return nil }
