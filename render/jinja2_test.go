package render

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/flosch/pongo2/v6"
)

// TestJinja2Constructs renders testdata/jinja2/cases.json with the context in context.json.
// Every case marked "jinja2": true has its expected output checked against the real Jinja2 by
// testdata/jinja2/check.py; the others are pongo2 syntax or our extensions.
func TestJinja2Constructs(t *testing.T) {
	var cases []struct {
		Name   string `json:"name"`
		Jinja2 bool   `json:"jinja2"`
		Tpl    string `json:"tpl"`
		Want   string `json:"want"`
	}
	readJSON(t, "testdata/jinja2/cases.json", &cases)
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	r := New(Options{})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := renderContext(r, map[string]string{"t": tc.Tpl}, "t", jinja2Context(t))
			if err != nil {
				t.Fatalf("%s\n%v", tc.Tpl, err)
			}
			if got != tc.Want {
				t.Errorf("%s\n want %q\n got  %q", tc.Tpl, tc.Want, got)
			}
		})
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// jinja2Context is testdata/jinja2/context.json as a render context: JSON numbers are
// float64, as a JSON-decoded services ConfigMap can give them.
func jinja2Context(t *testing.T) pongo2.Context {
	var raw map[string]any
	readJSON(t, "testdata/jinja2/context.json", &raw)
	var services []map[string]any
	for _, s := range raw["services"].([]any) {
		services = append(services, s.(map[string]any))
	}
	env := map[string]string{}
	for k, v := range raw["env"].(map[string]any) {
		env[k] = v.(string)
	}
	raw["services"] = services
	raw["env"] = env
	return pongo2.Context(raw)
}

// renderContext compiles srcs and renders the main key with ctx, without the trailing newline
// Render adds (execute returns the output as the template produced it).
func renderContext(r *Renderer, srcs map[string]string, key string, ctx pongo2.Context) (string, error) {
	c := r.compile(srcs, key)
	if c.err != nil {
		return "", c.err
	}
	rs := &renderState{}
	ctx[renderStateKey] = rs
	out, err := execute(c, ctx, rs)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
