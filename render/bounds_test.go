package render

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// renderWith renders one template (key "template") with opts.
func renderWith(t *testing.T, ctx context.Context, opts Options, tpl string) (*Bundle, error) {
	t.Helper()
	return New(opts).Render(ctx, testSnapshot(map[string]string{"template": tpl}, "template"))
}

// budgetErr checks that err is a render InputError against the template, at a line, whose
// message names the budget and its flag.
func budgetErr(t *testing.T, err error, budget, flag string) {
	t.Helper()
	var ie *snapshot.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) is not an InputError", err, err)
	}
	if ie.Stage != snapshot.StageRender || ie.Ref.Key != "template" || ie.Line == 0 {
		t.Errorf("stage %q ref %+v line %d: want stage render, key template and a line", ie.Stage, ie.Ref, ie.Line)
	}
	for _, want := range []string{budget, flag} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestTimeBudget: a template that runs too long is stopped (a render error naming the
// budget), whatever keeps it busy.
func TestTimeBudget(t *testing.T) {
	cases := map[string]string{
		"a loop that never ends": "{% for i in range(10 ** 15) %}{% endfor %}",
		// The inner loop reads i: iterations that read the same would be kept and written as
		// they were (reuse_body.go), and a million of those can end within the budget.
		"nested loops":            "{% for i in range(1000000) %}{% for j in range(i, i + 1000000) %}{% endfor %}{% endfor %}",
		"recursive macro fan-out": "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}",
		"include fan-out":         "{% for i in range(10 ** 12) %}{% include 'part' %}{% endfor %}",
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			b, err := New(Options{Timeout: 200 * time.Millisecond}).Render(context.Background(),
				testSnapshot(map[string]string{"template": tpl, "part": ""}, "template"))
			if err == nil {
				t.Fatalf("rendered %d bytes, want a time budget error", len(b.Config))
			}
			budgetErr(t, err, "time budget of 200ms", "--render-timeout")
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("stopped after %v", d)
			}
		})
	}
}

// TestOutputBudget: output beyond the budget, and huge values built before anything is
// written, are render errors; nothing that large is allocated first.
func TestOutputBudget(t *testing.T) {
	cases := map[string]string{
		"output":              "{% for i in range(10 ** 9) %}0123456789{% endfor %}",
		"string repetition":   "{{ 'x' * 10 ** 9 }}",
		"repetition in a set": "{% set s = 'abc' * 10 ** 9 %}",
		"list repetition":     "{% set l = [1, 2] * 10 ** 9 %}",
		"range to a list":     "{{ range(10 ** 9)|list|length }}",
		"join":                "{{ (['x' * 100000] * 100)|join(',') }}",
		"join of a range":     "{{ range(10 ** 8)|join(',') }}",
		"percent width":       "{{ '%999999999d' % 1 }}",
		"format width":        "{{ '{:>999999999}'.format(1) }}",
		"center":              "{{ 'x'|center(10 ** 9) }}",
		"ljust":               "{{ 'x'.ljust(10 ** 9) }}",
		"zfill":               "{{ '1'.zfill(10 ** 9) }}",
		"indent":              "{{ ('x\n' * 100000)|indent(10000) }}",
		"replace":             "{{ ('x' * 100000)|replace('x', 'y' * 1000) }}",
		"captured block":      "{% set s %}{% for i in range(10 ** 9) %}xxxxxxxxxx{% endfor %}{% endset %}",
		"appending":           "{% set l = [] %}{% for i in range(10 ** 9) %}{% do l.append(i) %}{% endfor %}",
		"concatenation":       "{% set ns = namespace(s='x' * 100000) %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
	}
	for name, tpl := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := renderWith(t, context.Background(), Options{MaxOutput: 1 << 20, Timeout: time.Minute}, tpl)
			if err == nil {
				t.Fatalf("rendered %d bytes, want an output budget error", len(b.Config))
			}
			budgetErr(t, err, "output budget of 1 MiB", "--render-max-output")
		})
	}
	t.Run("big ints", func(t *testing.T) {
		_, err := renderWith(t, context.Background(), Options{}, "{{ 2 ** (10 ** 9) }}")
		var ie *snapshot.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "too large") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("within the budget", func(t *testing.T) {
		b, err := renderWith(t, context.Background(), Options{MaxOutput: 1 << 20}, "{{ 'x' * 1000 }}")
		if err != nil || len(b.Config) != 1001 {
			t.Errorf("got %v", err)
		}
	})
}

// cancelAfter is a context that cancels itself after the render has looked at it n times:
// a cancellation in the middle of a render, without timing.
type cancelAfter struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int32
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) == 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestCancel: cancelling the context stops a render at once; that is not bad input.
func TestCancel(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := &cancelAfter{Context: base, cancel: cancel}
	ctx.n.Store(10)
	_, err := renderWith(t, ctx, Options{Timeout: time.Hour}, "{% for i in range(10 ** 15) %}{% endfor %}")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	var ie *snapshot.InputError
	if errors.As(err, &ie) {
		t.Errorf("a cancelled render is not bad input: %v", err)
	}
	if ctx.n.Load() > 0 {
		t.Errorf("the render stopped before it was cancelled")
	}
	if _, err := renderWith(t, base, Options{}, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("render with a done context: %v", err)
	}
}

// TestMemoryAfterOversizedRender: after a render is rejected for its size, the next render
// of the same template set does not start with a huge buffer.
func TestMemoryAfterOversizedRender(t *testing.T) {
	r := New(Options{MaxOutput: 4 << 20})
	tpl := map[string]string{"template": "{% for s in services %}{{ s.name }}\n{% endfor %}{% if env.REGION == 'big' %}{{ 'x' * (3 * 2 ** 20) }}{{ 'y' * (3 * 2 ** 20) }}{% endif %}"}
	s := testSnapshot(tpl, "template")
	s.Env = map[string]string{"REGION": "big"}
	if _, err := r.Render(context.Background(), s); err == nil {
		t.Fatal("the oversized render succeeded")
	}
	s.Env = map[string]string{"REGION": "eu"}
	b, err := r.Render(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if c := cap(b.Config); c > 64<<10 {
		t.Errorf("the render after an oversized one has a %d byte buffer", c)
	}
	if size := r.compile(tpl, "template").size.Load(); size != int64(len(b.Config)) {
		t.Errorf("size hint %d, want the last good output's size %d", size, len(b.Config))
	}
}
