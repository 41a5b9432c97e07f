package memory

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
)

func TestDefaultMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cases := []struct {
		name    string
		files   map[string]string
		env     string
		want    int64
		wantSet int64 // the runtime's limit afterwards
	}{
		{"cgroup v2 limit", map[string]string{"memory.max": "268435456\n"}, "", 241591905, 241591905},
		{"cgroup v2 without limit", map[string]string{"memory.max": "max\n"}, "", 0, math.MaxInt64},
		{"cgroup v1 limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, "", 483183819, 483183819},
		{"cgroup v1 without limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "", 0, math.MaxInt64},
		{"no cgroup files", nil, "", 0, math.MaxInt64},
		{"GOMEMLIMIT set", map[string]string{"memory.max": "268435456\n"}, "300MiB", 0, math.MaxInt64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			root := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return c.env
				}
				return ""
			}
			if got := defaultMemoryLimit(getenv, root); got != c.want {
				t.Errorf("limit %d, want %d", got, c.want)
			}
			if got := debug.SetMemoryLimit(-1); got != c.wantSet {
				t.Errorf("the runtime's limit is %d, want %d", got, c.wantSet)
			}
		})
	}
}

func TestApplyMemoryDefaults(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	t.Run("GOGC unset: the sidecar's default", func(t *testing.T) {
		debug.SetGCPercent(100)
		m := ApplyDefaults(env(nil), t.TempDir())
		if got := debug.SetGCPercent(100); got != defaultGCPercent {
			t.Errorf("GOGC is %d, want %d", got, defaultGCPercent)
		}
		if attrs := fmt.Sprint(m.Attrs()); !strings.Contains(attrs, "go_gc_percent 40 (the sidecar's default; GOGC overrides)") || !strings.Contains(attrs, "go_memory_limit none") {
			t.Errorf("start-up log attributes %s", attrs)
		}
	})
	t.Run("GOGC set: left alone", func(t *testing.T) {
		debug.SetGCPercent(77) // as the runtime would have set it from GOGC=77
		m := ApplyDefaults(env(map[string]string{"GOGC": "77", "GOMEMLIMIT": "300MiB"}), t.TempDir())
		if got := debug.SetGCPercent(100); got != 77 {
			t.Errorf("GOGC is %d, want 77", got)
		}
		if attrs := fmt.Sprint(m.Attrs()); !strings.Contains(attrs, "go_gc_percent 77") || !strings.Contains(attrs, "go_memory_limit 300MiB") {
			t.Errorf("start-up log attributes %s", attrs)
		}
	})
}

// TestTrimMemory: after a sync that freed much of the heap, the free pages go back to the OS
// at once; a little free heap is left to the runtime.
func TestTrimMemory(t *testing.T) {
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC()
	if f := free(); f <= trimThreshold {
		t.Skipf("only %d bytes of free heap after dropping 64 MiB: the runtime already returned them", f)
	}
	Trim()
	if f := free(); f > trimThreshold {
		t.Errorf("%d bytes of free heap kept after Trim, want at most %d", f, trimThreshold)
	}
}
