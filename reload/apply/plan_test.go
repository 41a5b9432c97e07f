package apply

import (
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

func TestAuxChanged(t *testing.T) {
	b := func(maps, files map[string]string) *render.Bundle {
		out := &render.Bundle{}
		for n, c := range maps {
			if out.Maps == nil {
				out.Maps = map[string][]byte{}
			}
			out.Maps[n] = []byte(c)
		}
		for n, c := range files {
			if out.Files == nil {
				out.Files = map[string][]byte{}
			}
			out.Files[n] = []byte(c)
		}
		return out
	}
	loaded := b(map[string]string{"hosts.map": "a x\n"}, map[string]string{"cors.lua": "-- v1"})
	for _, c := range []struct {
		name   string
		loaded *render.Bundle
		now    *render.Bundle
		want   string // "" or a part of the reason
	}{
		{"same", loaded, b(map[string]string{"hosts.map": "a x\n"}, map[string]string{"cors.lua": "-- v1"}), ""},
		{"not known", nil, b(map[string]string{"hosts.map": "b"}, nil), ""},
		{"none either way", b(nil, nil), b(nil, nil), ""},
		{"map contents changed: the runtime API's", loaded, b(map[string]string{"hosts.map": "a y\n"}, map[string]string{"cors.lua": "-- v1"}), ""},
		{"map added", loaded, b(map[string]string{"hosts.map": "a x\n", "paths.map": ""}, map[string]string{"cors.lua": "-- v1"}), "map file paths.map added"},
		{"map removed", loaded, b(nil, map[string]string{"cors.lua": "-- v1"}), "map file hosts.map removed"},
		{"file changed", loaded, b(map[string]string{"hosts.map": "a x\n"}, map[string]string{"cors.lua": "-- v2"}), "file cors.lua changed"},
		{"many", b(nil, nil), b(map[string]string{"a.map": "", "b.map": "", "c.map": "", "d.map": ""}, nil), "and 1 more"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := auxChanged(c.loaded, c.now)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("auxChanged = %q, want %q", got, c.want)
			}
		})
	}
}
