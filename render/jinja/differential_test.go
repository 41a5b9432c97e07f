package jinja

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/jinja2test"
)

// TestDifferential renders every case of testdata/differential/*.jinja with the real Jinja2
// (python3-jinja2, testdata/differential/jinja2_render.py) and with the engine, with the
// context of testdata/differential/context.json. Each case must render byte for byte as
// Jinja2 renders it, or fail in both.
//
// Corpus format: "=== name" starts a case whose main template ("t") is the text up to the
// next "===" or "---" line (its last newline excluded); "--- key" adds another template key.
func TestDifferential(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 300 {
		t.Fatalf("only %d cases in the corpus", len(cases))
	}
	ctxJSON, err := os.ReadFile("testdata/differential/context.json")
	if err != nil {
		t.Fatal(err)
	}
	want := runJinja2(t, ctxJSON, cases)
	vars := decodeContext(t, ctxJSON)
	failed := 0
	for i, c := range cases {
		got, gotErr := renderCase(c, vars)
		w := want[i]
		switch {
		case w.Err == "" && gotErr != nil:
			t.Errorf("%s: Jinja2 renders %q, the engine fails: %v\n%s", c.name, w.Out, gotErr, c.templates["t"])
		case w.Err != "" && gotErr == nil:
			t.Errorf("%s: Jinja2 fails (%s: %s), the engine renders %q\n%s", c.name, w.Type, w.Err, got, c.templates["t"])
		case w.Err == "" && got != w.Out:
			t.Errorf("%s:\n%s\n Jinja2 %q\n engine %q", c.name, c.templates["t"], w.Out, got)
		case w.Err != "" && w.Type == "UndefinedError" && !strings.Contains(gotErr.Error(), w.Err):
			t.Errorf("%s: Jinja2 fails with %q, the engine with %q\n%s", c.name, w.Err, gotErr, c.templates["t"])
		default:
			continue
		}
		failed++
	}
	t.Logf("%d cases, %d differ from Jinja2 %s", len(cases), failed, jinja2Version)
}

type corpusCase struct {
	name      string
	templates map[string]string
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("testdata/differential/*.jinja")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var cases []corpusCase
	seen := map[string]bool{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cur *corpusCase
		key := ""
		var text []string
		flush := func() {
			if cur != nil {
				cur.templates[key] = strings.Join(text, "\n")
			}
			text = nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "=== "):
				flush()
				name := filepath.Base(file) + ": " + strings.TrimPrefix(line, "=== ")
				if seen[name] {
					t.Fatalf("case %q twice", name)
				}
				seen[name] = true
				cases = append(cases, corpusCase{name: name, templates: map[string]string{}})
				cur, key = &cases[len(cases)-1], "t"
			case strings.HasPrefix(line, "--- ") && cur != nil:
				flush()
				key = strings.TrimPrefix(line, "--- ")
			default:
				text = append(text, line)
			}
		}
		flush()
	}
	return cases
}

type jinja2Result struct {
	Out  string `json:"out"`
	Err  string `json:"err"`
	Type string `json:"type"`
	Line int    `json:"line"` // where Jinja2 reports Err (0: nowhere)
}

var jinja2Version string

func runJinja2(t *testing.T, ctxJSON []byte, cases []corpusCase) []jinja2Result {
	t.Helper()
	type reqCase struct {
		Name      string            `json:"name"`
		Templates map[string]string `json:"templates"`
	}
	req := struct {
		Context json.RawMessage `json:"context"`
		Cases   []reqCase       `json:"cases"`
	}{Context: ctxJSON}
	for _, c := range cases {
		req.Cases = append(req.Cases, reqCase{c.name, c.templates})
	}
	results, version := jinja2test.Results[jinja2Result](t, "testdata/differential/jinja2_render.py", req, len(cases))
	jinja2Version = version
	return results
}

// decodeContext decodes JSON as Python's json module does: integers stay ints (beyond 64
// bits too), other numbers are floats.
func decodeContext(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return pyNumbers(v).(map[string]any)
}

func pyNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
			b, _ := new(big.Int).SetString(s, 10)
			return b
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

func renderCase(c corpusCase, vars map[string]any) (string, error) {
	p, err := Compile(c.templates, "t", Options{})
	if err != nil {
		return "", err
	}
	out, err := p.Render(context.Background(), vars, Limits{}, nil)
	if err != nil {
		var ue *UnsafeValueError
		if errors.As(err, &ue) {
			return "", err
		}
		return "", err
	}
	return string(out), nil
}
