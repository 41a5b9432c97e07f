package status

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OldWorkers is the haproxy_sidecar_old_workers gauge: HAProxy workers of previous
// configurations still finishing their connections after reloads. It is read at each scrape
// (from the master CLI's `show proc`), so it follows them as they exit; when HAProxy cannot be
// asked, the sample is left out.
type OldWorkers struct {
	desc *prometheus.Desc
	read func(ctx context.Context) (int, error)
}

// NewOldWorkers returns the collector; read counts the old workers.
func NewOldWorkers(read func(ctx context.Context) (int, error)) *OldWorkers {
	return &OldWorkers{
		desc: prometheus.NewDesc("haproxy_sidecar_old_workers",
			"HAProxy workers of previous configurations still running (finishing their connections after a reload), from show proc.", nil, nil),
		read: read,
	}
}

// Describe implements prometheus.Collector.
func (o *OldWorkers) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

// Collect implements prometheus.Collector.
func (o *OldWorkers) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := o.read(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(n))
}
