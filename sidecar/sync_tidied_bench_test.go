package sidecar

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/memory"
)

// BenchmarkSyncTidied10000: BenchmarkSyncNewIngress10000's syncs (the first, then a new route
// per op) with the binary's memory settings (GOGC=40, the Tidier after each sync): peak-MB is
// the most memory the Go runtime held of the OS (its share of RSS: the heap's objects, free
// and unused span space, stacks and metadata) over the first sync and the changes, first-MB
// over the first sync alone, gc/op the collections per change, cpu-ms/op the process's CPU
// time per change. Run it in a process of its own: what an earlier benchmark left mapped
// counts.
func BenchmarkSyncTidied10000(b *testing.B) {
	const n, extra = 10000, 100
	cfg := ingressSyncConfig(b)
	objs := ingressBenchObjects(b, cfg.Inputs, n, extra)
	debug.FreeOSMemory() // what making them held is not the sync's
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	settings := memory.ApplyDefaults(func(string) string { return "" }, b.TempDir())
	tidier := settings.Tidier()
	peak, stop := watchHeld()
	defer stop()
	p, src := syncPipeline(b, cfg, objs, extra)
	ctx := context.Background()
	if res := p.Sync(ctx, "start"); res.Outcome != apply.Applied {
		b.Fatalf("first sync: %v %v", res.Outcome, res.Err)
	}
	first := peak()
	tidier.AfterSync()
	gc := memory.Collections()
	cpu := benchCPU()
	for b.Loop() {
		if !src.next() {
			b.Fatalf("more than %d changes", extra)
		}
		if res := p.Sync(ctx, "change"); res.Outcome != apply.Applied {
			b.Fatalf("change: %v %v", res.Outcome, res.Err)
		}
		tidier.AfterSync()
	}
	b.ReportMetric(float64(benchCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(memory.Collections()-gc)/float64(b.N), "gc/op")
	b.ReportMetric(float64(first)/(1<<20), "first-MB")
	b.ReportMetric(float64(peak())/(1<<20), "peak-MB")
	runtime.KeepAlive(p)
}

// watchHeld samples what the Go runtime holds of the OS (total - released) every 200 µs and
// returns a function that gives the most so far, and one that stops the sampling.
func watchHeld() (most func() uint64, stop func()) {
	var (
		mu      sync.Mutex
		held    uint64
		stopped bool
	)
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	go func() {
		for {
			metrics.Read(sample)
			mu.Lock()
			held = max(held, sample[0].Value.Uint64()-sample[1].Value.Uint64())
			done := stopped
			mu.Unlock()
			if done {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return func() uint64 { mu.Lock(); defer mu.Unlock(); return held },
		func() { mu.Lock(); defer mu.Unlock(); stopped = true }
}
