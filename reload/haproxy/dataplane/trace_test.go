package dataplane

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

type seenKey struct{}

// confirmations collects OnConfirmed calls: the host, and the value of the Reload's context.
type confirmations struct {
	mu  sync.Mutex
	got map[string]any
}

func (c *confirmations) confirmed(ctx context.Context, endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[endpoint] = ctx.Value(seenKey{})
}

func (c *confirmations) of(endpoint string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.got[endpoint]
	return v, ok
}

// TestEachHostIsASpanAndConfirms: each host's update is a span below the one of the Reload's
// context; a host that confirms says so with that context's values, a host retried in the
// background too, once it is back.
func TestEachHostIsASpanAndConfirms(t *testing.T) {
	haproxytest.Binary(t)
	a := startHost(t, peerA, dataplanetest.Options{})
	b := startHost(t, peerB, dataplanetest.Options{})
	conf := &confirmations{got: map[string]any{}}
	h := newHarness(t, Config{URLs: []string{a.URL, b.URL}, OnConfirmed: conf.confirmed})
	port := peerPort(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, reload := tp.Tracer("test").Start(context.WithValue(t.Context(), seenKey{}, "the change"), "reload")

	b.Down()
	h.live.set(t, httpConfig(port, haproxytest.Backend(t, "backend A")), nil)
	if err := h.r.Reload(ctx); err != nil {
		t.Fatalf("Reload with one host down: %v", err)
	}
	reload.End()
	if v, ok := conf.of(a.URL); !ok || v != "the change" {
		t.Errorf("host A confirmed %v with %v, want the Reload's context", ok, v)
	}
	if _, ok := conf.of(b.URL); ok {
		t.Error("the host that is down confirmed")
	}
	b.Up(t)
	haproxytest.WaitFor(t, 10*time.Second, func() bool { _, ok := conf.of(b.URL); return ok }, "host B confirms once back")
	if v, _ := conf.of(b.URL); v != "the change" {
		t.Errorf("host B's retry confirmed with %v, want the Reload's context", v)
	}
	waitServes(t, peerB+":"+strconv.Itoa(port), "backend A")

	// Each host's outcome by its spans (a span ends just after its host confirmed).
	outcomes := func() map[string][]codes.Code {
		got := map[string][]codes.Code{}
		for _, s := range spans.Ended() {
			if s.Name() != "dataplane host" {
				continue
			}
			if s.Parent().SpanID() != reload.SpanContext().SpanID() {
				t.Errorf("a host's span is not below the Reload's")
			}
			for _, kv := range s.Attributes() {
				if kv.Key == "dataplane.endpoint" {
					got[kv.Value.AsString()] = append(got[kv.Value.AsString()], s.Status().Code)
				}
			}
		}
		return got
	}
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		b := outcomes()[b.URL]
		return len(b) > 0 && b[len(b)-1] != codes.Error
	}, "host B's successful span ended")
	got := outcomes()
	if a := got[a.URL]; len(a) != 1 || a[0] == codes.Error {
		t.Errorf("host A's spans: %v, want one that succeeded", a)
	}
	if b := got[b.URL]; len(b) < 2 || b[0] != codes.Error {
		t.Errorf("host B's spans: %v, want a failure, then, in the background, a success", b)
	}
}
