package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/allocs"
)

// stylesYAML writes values in every style YAML has; each "@" in a value is a mark whose place
// in the file the test checks.
const stylesYAML = `# values in every style
apiVersion: v1
kind: ConfigMap
metadata:
  name: styles
  namespace: lb
data:
  literal: |
    line one
      indented @here
  strip: |-

    after an empty line @
  explicit: |2
       three spaces, @ here
  keep: |+
    kept @

  folded: >
    folded one
    folded two @

    next paragraph
      more indented @x
    back @y
  quoted: "a\n@b"
  single: 'single @'
  plain: plain @
  crlf: |
    é accented @
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: lb}
data:
  both: eA==
  base64: QGF0
stringData:
  both: |
      string @data
`

const listYAML = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: first}
  data:
    k: |
      first @
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: second}
  data:
    k: |-
      second
        @
`

const configMapJSON = `{"apiVersion": "v1", "kind": "ConfigMap",
 "metadata": {"name": "json"},
 "data": {"k": "x\n@"}}
`

const configMapListJSON = `{"apiVersion": "v1", "kind": "ConfigMapList", "items": [
  {"metadata": {"name": "j1"}, "data": {"k": "@1"}},
  {"metadata": {"name": "j2"},
   "data": {"k": "@2"}}]}
`

// TestOriginsPointIntoTheFile: what the file source records of where each ConfigMap and Secret
// value is written maps a line and column inside the value to the very character in the file,
// for literal and folded block scalars (whatever their indentation, chomping and folding); for
// the other styles (quoted, plain, base64 data, JSON) it is where the value starts.
func TestOriginsPointIntoTheFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"styles.yaml": stylesYAML, "sub/list.yaml": listYAML,
		"cm.json": configMapJSON, "list.json": configMapListJSON}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if name == "styles.yaml" {
			text = strings.Replace(text, "  crlf: |\n    é accented @\n", "  crlf: |\r\n    é accented @\r\n", 1)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := &File{Dir: dir, DefaultNamespace: "lb"}
	objs, err := src.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Read again (the files unchanged), and with JSON read the slow way (no fast scan):
	// the same origins.
	again, err := src.Objects(context.Background())
	if err != nil || !reflect.DeepEqual(again.Origins, objs.Origins) {
		t.Errorf("read again, the origins differ (%v)", err)
	}
	slow, err := (&File{Dir: dir, DefaultNamespace: "lb", json: &jsonOptions{streamMin: math.MaxInt64}}).Objects(context.Background())
	if err != nil || !reflect.DeepEqual(slow.Origins, objs.Origins) {
		t.Errorf("JSON read without the fast path, the origins differ (%v):\n%v\n%v", err, slow.Origins, objs.Origins)
	}
	values := map[snapshot.Ref]string{}
	for _, cm := range objs.ConfigMaps {
		for k, v := range cm.Data {
			values[snapshot.Ref{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, Key: k}] = v
		}
	}
	for _, s := range objs.Secrets {
		for k, v := range s.Data {
			values[snapshot.Ref{Kind: "Secret", Namespace: s.Namespace, Name: s.Name, Key: k}] = string(v)
		}
	}
	cases := []struct {
		name, file, key string
		kind            string // ConfigMap by default
		// start, when set: only where the value starts is known, and the file has this there.
		start string
	}{
		{name: "styles", key: "literal", file: "styles.yaml"},
		{name: "styles", key: "strip", file: "styles.yaml"},
		{name: "styles", key: "explicit", file: "styles.yaml"},
		{name: "styles", key: "keep", file: "styles.yaml"},
		{name: "styles", key: "folded", file: "styles.yaml"},
		{name: "styles", key: "crlf", file: "styles.yaml"},
		{name: "styles", key: "quoted", file: "styles.yaml", start: `"a\n@b"`},
		{name: "styles", key: "single", file: "styles.yaml", start: `'single @'`},
		{name: "styles", key: "plain", file: "styles.yaml", start: "plain @"},
		{name: "keys", kind: "Secret", key: "both", file: "styles.yaml"},
		{name: "keys", kind: "Secret", key: "base64", file: "styles.yaml", start: "QGF0"},
		{name: "first", key: "k", file: "sub/list.yaml"},
		{name: "second", key: "k", file: "sub/list.yaml"},
		{name: "json", key: "k", file: "cm.json", start: `"x\n@"`},
		{name: "j1", key: "k", file: "list.json", start: `"@1"`},
		{name: "j2", key: "k", file: "list.json", start: `"@2"`},
	}
	for _, tc := range cases {
		kind := tc.kind
		if kind == "" {
			kind = "ConfigMap"
		}
		ref := snapshot.Ref{Kind: kind, Namespace: "lb", Name: tc.name, Key: tc.key}
		t.Run(ref.String(), func(t *testing.T) {
			value, ok := values[ref]
			if !ok {
				t.Fatalf("not read (%v)", values)
			}
			text, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
			at := func(p snapshot.Position) string {
				if p.File != filepath.Join(dir, tc.file) || p.Line < 1 || p.Line > len(lines) || p.Col < 1 {
					t.Fatalf("position %v is not in %s", p, tc.file)
				}
				r := []rune(lines[p.Line-1])
				if p.Col > len(r) {
					t.Fatalf("position %v is past the end of line %q", p, lines[p.Line-1])
				}
				return string(r[p.Col-1:])
			}
			if tc.start != "" {
				for _, line := range []int{0, 2} {
					p, ok := objs.Origins.At(ref, line, 1)
					if !ok || !strings.HasPrefix(at(p), tc.start) {
						t.Errorf("line %d: at %v (%v) the file has %q, want the value's start %q", line, p, ok, at(p), tc.start)
					}
				}
				return
			}
			marks := 0
			for i, l := range strings.Split(value, "\n") {
				for j, r := range []rune(l) {
					if r != '@' {
						continue
					}
					marks++
					p, ok := objs.Origins.At(ref, i+1, j+1)
					if got := at(p); !ok || !strings.HasPrefix(got, "@") {
						t.Errorf("line %d column %d of the value: %v has %q, want the mark", i+1, j+1, p, got)
					}
				}
			}
			if marks == 0 {
				t.Fatalf("no mark in %q", value)
			}
		})
	}
	// An object is where it starts; a file is where its lines are.
	if p, ok := objs.Origins.At(snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "second"}, 0, 0); !ok || p.Line != 13 {
		t.Errorf("ConfigMap second at %v (%v), want line 13 of sub/list.yaml", p, ok)
	}
	if p, ok := objs.Origins.At(snapshot.Ref{Kind: "File", Name: filepath.Join("sub", "list.yaml")}, 4, 7); !ok || p.String() != filepath.Join(dir, "sub", "list.yaml")+":4:7" {
		t.Errorf("a line of a file at %v (%v)", p, ok)
	}
}

// TestFoldAsYAMLFolds: the folding that maps the lines of a folded block scalar gives the
// value YAML gives.
func TestFoldAsYAMLFolds(t *testing.T) {
	cases := []struct {
		lines []string
		want  string
	}{
		{[]string{"a", "b"}, "a b"},
		{[]string{"a", "", "b"}, "a\nb"},
		{[]string{"a", "", "", "b"}, "a\n\nb"},
		{[]string{"", "a"}, "\na"},
		{[]string{"a", "  b", "c"}, "a\n  b\nc"},
		{[]string{"a", "  b", "", "c"}, "a\n  b\n\nc"},
	}
	for _, tc := range cases {
		starts, got := fold(tc.lines)
		if got != tc.want {
			t.Errorf("%q folds to %q, want %q", tc.lines, got, tc.want)
		}
		for i, l := range tc.lines {
			if l == "" {
				continue
			}
			vl := strings.Split(got, "\n")[starts[i].Line-1]
			if !strings.HasPrefix(string([]rune(vl)[starts[i].Col-1:]), l) {
				t.Errorf("%q: line %d is said to start at %v of %q", tc.lines, i, starts[i], got)
			}
		}
	}
}

// BenchmarkDataKeyPositions: what finding where the data keys are written adds to reading a
// ConfigMap (the example's template, tests included): a second parse of its YAML, only for
// ConfigMaps and Secrets, only when their file changed. docs/performance.md has the numbers.
func BenchmarkDataKeyPositions(b *testing.B) {
	data, err := os.ReadFile("../examples/local/config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if objs, err := DecodeManifests("config.yaml", data, "lb", nil); err != nil || len(objs.Origins) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("positions", func(b *testing.B) {
		for b.Loop() {
			if root, _ := writtenIn(data, 1, 1, ""); root == nil {
				b.Fatal("no positions")
			}
		}
	})
}

// TestOriginsOfManyKeysSizedOnce: the origins of a ConfigMap of many keys (the services of
// 10,000 x 10) go into a map made at its size, not grown through doubling sizes at each
// read (2.4 MB of garbage a read at 10,000 keys, on the way to a pod edit's peak).
func TestOriginsOfManyKeysSizedOnce(t *testing.T) {
	const n = 4000
	data := make(map[string]string, n)
	for i := range n {
		data[fmt.Sprintf("svc-%05d", i)] = fmt.Sprintf(`{"hostnames":["svc-%05d.example.com"]}`, i)
	}
	cm, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "services", "namespace": "lb"}, "data": data})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.json"), cm, 0o644); err != nil {
		t.Fatal(err)
	}
	src := &File{Dir: dir, DefaultNamespace: "lb"}
	objs, err := src.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Origins) != n+2 { // the file, the ConfigMap, its keys
		t.Fatalf("%d origins, want %d", len(objs.Origins), n+2)
	}
	// A read of the file unchanged allocates the origins and little else: 1.5 MB here with
	// the map made at its size, 2.75 MB grown through doubling sizes.
	per := allocs.PerRun(3, func() {
		if _, err := src.Objects(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	if per > 2<<20 { // 1.5 MB measured; 2.75 MB with the map grown
		t.Errorf("a read of %d keys unchanged allocates %d bytes, want at most 2 MiB", n, per)
	}
	t.Logf("a read of %d keys unchanged allocates %d bytes", n, per)
}

// TestOriginsOfManyObjectsSizedOnce: the origins of several ConfigMaps of many keys (the
// services and another big one) go into a map made once at the size of all of them, not made
// again for each big object (nor grown through doubling sizes after the first).
func TestOriginsOfManyObjectsSizedOnce(t *testing.T) {
	const objects, keys = 4, 1000
	dir := t.TempDir()
	for o := range objects {
		data := make(map[string]string, keys)
		for i := range keys {
			data[fmt.Sprintf("svc-%05d", i)] = fmt.Sprintf(`{"hostnames":["svc-%05d.example.com"]}`, i)
		}
		cm, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("big-%d", o), "namespace": "lb"}, "data": data})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("big-%d.json", o)), cm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := &File{Dir: dir, DefaultNamespace: "lb"}
	objs, err := src.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := objects * (keys + 2); len(objs.Origins) != want { // each file, ConfigMap, key
		t.Fatalf("%d origins, want %d", len(objs.Origins), want)
	}
	per := allocs.PerRun(3, func() {
		if _, err := src.Objects(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	if per > 2<<20 { // 1.5 MB measured (as one object of all the keys); 2.45 MB made again
		t.Errorf("a read of %d objects of %d keys unchanged allocates %d bytes, want at most 2 MiB", objects, keys, per)
	}
	t.Logf("a read of %d objects of %d keys unchanged allocates %d bytes", objects, keys, per)
}

// TestOriginsKeptWhileMadeOfTheSame: a read whose ConfigMaps and Secrets are the last read's,
// from the same places of the same files (an edit of a pod), gives the last read's Origins,
// not a copy (the services ConfigMap's 10,000 keys are 2.4 MB); a read where they moved, or
// where the files are others, gives new ones that say so.
func TestOriginsKeptWhileMadeOfTheSame(t *testing.T) {
	dir := t.TempDir()
	services := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: services\ndata:\n  web: x\n"
	pods := func(ready bool) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + podJSON("web-0", "10.0.0.1", ready) + `]}`
	}
	writeFiles(t, dir, map[string]string{"services.yaml": services, "pods.json": pods(true)})
	f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), PodConverter: &snapshot.PodConverter{},
		now: func() time.Time { return time.Now().Add(time.Hour) }} // no file is racy
	web := snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "web"}
	line := func(o *snapshot.Objects, ref snapshot.Ref) int {
		t.Helper()
		og, ok := o.Origins[ref]
		if !ok {
			t.Fatalf("no origin of %v", ref)
		}
		return og.Line
	}
	same := func(a, b *snapshot.Objects) bool {
		return reflect.ValueOf(a.Origins).UnsafePointer() == reflect.ValueOf(b.Origins).UnsafePointer()
	}

	first := read(t, f)
	if line(first, web) != 6 {
		t.Fatalf("web's value on line %d, want 6", line(first, web))
	}
	writeFiles(t, dir, map[string]string{"pods.json": pods(false)})
	o := read(t, f)
	if f.last.parsed != 1 || !same(o, first) {
		t.Errorf("a pod edited: %d files parsed (want 1), the same origins %v (want true)", f.last.parsed, same(o, first))
	}
	writeFiles(t, dir, map[string]string{"services.yaml": "# moved down\n" + services})
	moved := read(t, f)
	if same(moved, o) || line(moved, web) != 7 {
		t.Errorf("the ConfigMap moved down a line: the same origins %v, web's value on line %d; want new ones, 7", same(moved, o), line(moved, web))
	}
	// A file of no ConfigMap or Secret: only the files differ.
	writeFiles(t, dir, map[string]string{"other.json": podJSON("web-1", "10.0.0.2", true)})
	o = read(t, f)
	other := snapshot.Ref{Kind: "File", Name: "other.json"}
	if _, ok := o.Origins[other]; same(o, moved) || !ok || line(o, web) != 7 {
		t.Errorf("a file added: the same origins %v, the file's %v, web's value on line %d; want new ones, true, 7", same(o, moved), ok, line(o, web))
	}
	if err := os.Remove(filepath.Join(dir, "other.json")); err != nil {
		t.Fatal(err)
	}
	o = read(t, f)
	if _, ok := o.Origins[other]; ok || len(o.Origins) != len(moved.Origins) {
		t.Errorf("the file removed: its origin %v, %d origins; want none, %d", ok, len(o.Origins), len(moved.Origins))
	}
}
