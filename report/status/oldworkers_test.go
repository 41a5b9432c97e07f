package status

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestOldWorkers(t *testing.T) {
	gather := func(t *testing.T, read func(context.Context) (int, error)) []float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewOldWorkers(read))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, mf := range mfs {
			if mf.GetName() != "haproxy_sidecar_old_workers" {
				t.Fatalf("metric %q", mf.GetName())
			}
			for _, m := range mf.GetMetric() {
				out = append(out, m.GetGauge().GetValue())
			}
		}
		return out
	}
	t.Run("read at each scrape", func(t *testing.T) {
		n := 0
		read := func(context.Context) (int, error) { n++; return n, nil }
		if got := gather(t, read); len(got) != 1 || got[0] != 1 {
			t.Fatalf("first scrape %v", got)
		}
		if got := gather(t, read); len(got) != 1 || got[0] != 2 {
			t.Fatalf("second scrape %v", got)
		}
	})
	t.Run("left out when HAProxy cannot be asked", func(t *testing.T) {
		if got := gather(t, func(context.Context) (int, error) { return 0, errors.New("refused") }); len(got) != 0 {
			t.Fatalf("samples %v", got)
		}
	})
}
