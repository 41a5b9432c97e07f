package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
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
