package render

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
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

// jinja2Context is testdata/jinja2/context.json as a render context, numbers decoded as
// Python's json module decodes them (and as the snapshot gives them): integers as int64,
// other numbers as float64.
func jinja2Context(t *testing.T) map[string]any {
	b, err := os.ReadFile("testdata/jinja2/context.json")
	if err != nil {
		t.Fatal(err)
	}
	raw := decodePython(t, b).(map[string]any)
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
	return raw
}

// decodePython decodes JSON as Python's json module does: integers stay integers.
func decodePython(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return pyNumbers(v)
}

func pyNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = pyNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = pyNumbers(e)
		}
	}
	return v
}

// renderContext compiles srcs and renders the main key with ctx, without the trailing newline
// Render adds.
func renderContext(r *Renderer, srcs map[string]string, key string, ctx map[string]any) (string, error) {
	c := r.compile(srcs, key)
	if c.err != nil {
		return "", c.err
	}
	out, err := c.prog.Render(context.Background(), ctx, jinja.Limits{}, nil)
	if err != nil {
		return "", err
	}
	return string(out), nil
}
