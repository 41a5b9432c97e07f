package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// jsonCorpus are JSON manifest files the fast path reads (or gives up on) and the slow path
// reads: valid ones, and every kind of mistake.
var jsonCorpus = map[string]string{
	"list of pods": `{"apiVersion":"v1","kind":"List","items":[` + podJSON("a", "10.0.0.1", true) + `,` + podJSON("b", "10.0.0.2", false) + `]}`,
	"kubectl order": `{
    "apiVersion": "v1",
    "items": [
        ` + podJSON("a", "10.0.0.1", true) + `
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
`,
	"typed list":               `{"apiVersion":"v1","kind":"ConfigMapList","items":[{"metadata":{"name":"a"},"data":{"k":"v"}},{"kind":"ConfigMap","metadata":{"name":"b"}}]}`,
	"typed list, no kind":      `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p","namespace":"shop"},"status":{"podIP":"10.0.0.3"}}]}`,
	"several objects":          `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}` + "\n\n" + `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
	"empty":                    " \n",
	"empty list":               `{"apiVersion":"v1","kind":"List","items":[]}`,
	"list without items":       `{"apiVersion":"v1","kind":"List"}`,
	"items null":               `{"apiVersion":"v1","kind":"List","items":null}`,
	"escapes in values":        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e"},"data":{"k":"a\"b\\\\\"c\u00e9\n","x\\":"\\"}}`,
	"unicode":                  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"u"},"data":{"k":"żółw"}}`,
	"numbers":                  `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"n","generation":-0},"spec":{"terminationGracePeriodSeconds":1e2,"priority":0,"containers":[{"name":"c","ports":[{"containerPort":8.0e+1}]}]}}]}`,
	"other kinds":              `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}},{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}]}`,
	"defined twice":            `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}`,
	"no name":                  `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}]}`,
	"syntax error":             `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},}]}`,
	"syntax error in a string": "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\tb\"}}]}",
	"control character":        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\x1fb\"}}",
	"invalid UTF-8 in kind":    "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"apiVersion\":\"v1\",\"kind\":\"\xe6\",\"metadata\":{\"name\":\"a\"}}]}",
	"bad escape":               `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a\x"}}]}`,
	"bad number":               `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","generation":01}}]}`,
	"truncated":                `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`,
	"trailing garbage":         `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} x`,
	"not an object":            `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]`,
	"item not an object":       `{"apiVersion":"v1","kind":"List","items":[1]}`,
	"no kind":                  `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","metadata":{"name":"a"}}]}`,
	"no apiVersion":            `{"apiVersion":"v1","kind":"List","items":[{"kind":"ConfigMap","metadata":{"name":"a"}}]}`,
	"bad apiVersion":           `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"a/b/c","kind":"ConfigMap","metadata":{"name":"a"}}]}`,
	"kind not a string":        `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":7,"metadata":{"name":"a"}}]}`,
	"Kind in capitals":         `{"apiVersion":"v1","Kind":"ConfigMap","metadata":{"name":"a"}}`,
	"escaped kind key":         `{"apiVersion":"v1","kin\u0064":"ConfigMap","metadata":{"name":"a"}}`,
	"duplicate kind":           `{"apiVersion":"v1","kind":"Secret","kind":"ConfigMap","metadata":{"name":"a"}}`,
	"nested list":              `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}]}`,
	"items on a non-list":      `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"items":[{}]}`,
	"unknown field":            `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"dat":{}}]}`,
	"duplicate field":          `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"}}]}`,
	"wrong type":               `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[1]}]}`,
	"secret not base64":        `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"},"data":{"k":"hunter2!!"}}]}`,
	"deep nesting":             `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","annotations":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`,
}

// podJSON is a pod as `kubectl get -o json` prints it.
func podJSON(name, ip string, ready bool) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"shop","labels":{"app":"web"}},`+
		`"spec":{"containers":[{"name":"app","image":"nginx"}]},`+
		`"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"containerStatuses":[{"name":"app","ready":%v,"restartCount":0,"image":"nginx","imageID":""}]}}`,
		name, ip, ip, ready)
}

// readDir is what a File reads from dir (typed pods, or converted ones with conv), as
// comparable text: the objects, then the errors.
func readDir(t *testing.T, f *File) (objs *snapshot.Objects, errs []string) {
	t.Helper()
	objs, err := f.Objects(context.Background())
	if err == nil {
		return objs, nil
	}
	var ie *snapshot.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("not an input error: %v", err)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			errs = append(errs, e.Error())
		}
	} else {
		errs = append(errs, err.Error())
	}
	return nil, errs
}

// sameObjects compares what two reads gave; pods may be typed in one and converted in the
// other.
func sameObjects(t *testing.T, a, b *snapshot.Objects) {
	t.Helper()
	if !reflect.DeepEqual(a.ConfigMaps, b.ConfigMaps) || !reflect.DeepEqual(a.Secrets, b.Secrets) {
		t.Errorf("ConfigMaps or Secrets differ:\n%v\n%v", names(a), names(b))
	}
	pods := func(o *snapshot.Objects) []string {
		var conv snapshot.PodConverter
		var out []string
		for _, p := range o.Pods {
			cp := conv.Convert(p)
			out = append(out, fmt.Sprintf("%s/%s ready=%v %v", cp.Namespace(), cp.Name(), cp.Ready(), cp.Object()))
		}
		for _, p := range o.ConvertedPods {
			out = append(out, fmt.Sprintf("%s/%s ready=%v %v", p.Namespace(), p.Name(), p.Ready(), p.Object()))
		}
		return out
	}
	if pa, pb := pods(a), pods(b); !slices.Equal(pa, pb) {
		t.Errorf("pods differ:\n%v\n%v", pa, pb)
	}
}

// TestJSONFastPath: with and without the fast path, typed or converted pods, cold or from the
// cache, every file of the corpus gives the same objects or the same errors (text and order).
func TestJSONFastPath(t *testing.T) {
	for name, content := range jsonCorpus {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"a.json": content, "b.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other","namespace":"x"}}`})
			slow := defaultJSON()
			slow.fast = false
			slowObjs, slowErrs := readDir(t, &File{Dir: dir, DefaultNamespace: "lb", json: &slow})
			fastObjs, fastErrs := readDir(t, &File{Dir: dir, DefaultNamespace: "lb"})
			cached := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}}
			coldObjs, coldErrs := readDir(t, cached)
			warmObjs, warmErrs := readDir(t, cached)
			stream := defaultJSON()
			stream.streamMin, stream.streamBuf = 0, 7 // every JSON file streamed, through a window of 7 bytes
			streamedObjs, streamedErrs := readDir(t, &File{Dir: dir, DefaultNamespace: "lb", json: &stream})
			streamed := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, json: &stream}
			sColdObjs, sColdErrs := readDir(t, streamed)
			sWarmObjs, sWarmErrs := readDir(t, streamed)
			for _, c := range []struct {
				name string
				objs *snapshot.Objects
				errs []string
			}{
				{"fast path", fastObjs, fastErrs},
				{"converted", coldObjs, coldErrs},
				{"converted, from the cache", warmObjs, warmErrs},
				{"streamed", streamedObjs, streamedErrs},
				{"streamed, converted", sColdObjs, sColdErrs},
				{"streamed, converted, from the cache", sWarmObjs, sWarmErrs},
			} {
				if !slices.Equal(c.errs, slowErrs) {
					t.Errorf("%s: errors\n%q\nwant\n%q", c.name, c.errs, slowErrs)
					continue
				}
				if slowObjs != nil {
					sameObjects(t, slowObjs, c.objs)
				}
			}
		})
	}
}

// TestJSONFastPathTaken: the fast path reads the usual shapes itself.
func TestJSONFastPathTaken(t *testing.T) {
	for _, name := range []string{"list of pods", "kubectl order", "typed list", "typed list, no kind", "several objects", "empty", "empty list", "escapes in values", "unicode", "numbers", "other kinds"} {
		t.Run(name, func(t *testing.T) {
			d := newManifestDecoder("lb", testLogger(t))
			docs, ok := scanJSONFile([]byte(jsonCorpus[name]))
			if !ok || !d.scannedJobs("a.json", []byte(jsonCorpus[name]), docs) {
				t.Error("the fast path gave up")
			}
		})
	}
}

// TestStreamTaken: the streaming path reads Lists itself, through any window size.
func TestStreamTaken(t *testing.T) {
	for _, name := range []string{"list of pods", "kubectl order", "typed list", "typed list, no kind", "numbers", "other kinds"} {
		for _, size := range []int{1, 7, 1 << 20} {
			t.Run(fmt.Sprintf("%s window %d", name, size), func(t *testing.T) {
				d := newManifestDecoder("lb", testLogger(t))
				d.json.streamBuf = size
				data := jsonCorpus[name]
				sum, n, err := d.streamJSON("a.json", strings.NewReader(data))
				if err != nil {
					t.Fatalf("the streaming path gave up: %v", err)
				}
				if n != int64(len(data)) || sum != xxhash.Sum64String(data) {
					t.Errorf("read %d bytes, hash %x; want %d, %x", n, sum, len(data), xxhash.Sum64String(data))
				}
				want := newManifestDecoder("lb", testLogger(t))
				want.file("a.json", []byte(data))
				if len(d.jobs) != len(want.jobs) {
					t.Errorf("%d objects, the in-memory path %d", len(d.jobs), len(want.jobs))
				}
			})
		}
	}
}

// TestStreamDecodesEarly: items that name their own kind are decoded while the List is read
// and their bytes dropped, so a large List is never held whole; items whose kind comes from
// a typed List wait for the List's end, with their bytes.
func TestStreamDecodesEarly(t *testing.T) {
	for _, c := range []struct {
		name  string
		early bool
	}{
		{"list of pods", true},
		{"kubectl order", true},
		{"typed list, no kind", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newManifestDecoder("lb", testLogger(t))
			if _, _, err := d.streamJSON("a.json", strings.NewReader(jsonCorpus[c.name])); err != nil {
				t.Fatalf("the streaming path gave up: %v", err)
			}
			if len(d.jobs) == 0 {
				t.Fatal("no objects")
			}
			for i, j := range d.jobs {
				if decoded := j.res != nil && j.p.data == nil; decoded != c.early {
					t.Errorf("item %d: decoded early with its bytes dropped = %v, want %v", i, decoded, c.early)
				}
			}
			d.finish()
			want := newManifestDecoder("lb", testLogger(t))
			want.file("a.json", []byte(jsonCorpus[c.name]))
			want.finish()
			if got, exp := fmt.Sprint(d.objs), fmt.Sprint(want.objs); got != exp {
				t.Errorf("objects differ from the in-memory path:\n%s\n%s", got, exp)
			}
		})
	}
}

// TestFileCache: with a PodConverter, a second read decodes only what changed, and still
// reports every error.
func TestFileCache(t *testing.T) {
	dir := t.TempDir()
	list := func(pods ...string) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(pods, ",") + `]}`
	}
	writeFiles(t, dir, map[string]string{"pods.json": list(podJSON("a", "10.0.0.1", true), podJSON("b", "10.0.0.2", true), podJSON("c", "10.0.0.3", true))})
	f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}}
	read := func() map[string]*snapshot.Pod {
		t.Helper()
		o, errs := readDir(t, f)
		if errs != nil {
			t.Fatal(errs)
		}
		if len(o.Pods) != 0 {
			t.Errorf("%d typed pods with a PodConverter", len(o.Pods))
		}
		out := map[string]*snapshot.Pod{}
		for _, p := range o.ConvertedPods {
			out[p.Name()] = p
		}
		return out
	}
	first := read()
	writeFiles(t, dir, map[string]string{"pods.json": list(podJSON("a", "10.0.0.1", true), podJSON("b", "10.0.0.2", false), "\n"+podJSON("c", "10.0.0.3", true))})
	second := read()
	if first["a"] != second["a"] || first["c"] != second["c"] {
		t.Error("unchanged pods were decoded again")
	}
	if first["b"] == second["b"] || second["b"].Ready() {
		t.Error("the changed pod b was not decoded again")
	}
	if got := len(f.cache.entries); got != 3 {
		t.Errorf("the cache holds %d objects, want 3", got)
	}
	writeFiles(t, dir, map[string]string{"pods.json": list(podJSON("a", "10.0.0.1", true)), "copy.json": list(podJSON("a", "10.0.0.1", true))})
	for range 2 {
		if _, errs := readDir(t, f); len(errs) != 1 || !strings.Contains(errs[0], "Pod shop/a is defined twice") {
			t.Errorf("errors %q, want pod a defined twice", errs)
		}
	}
	if got := len(f.cache.entries); got != 1 {
		t.Errorf("the cache holds %d objects, want 1 (pods b and c are gone)", got)
	}
	t.Run("the same items under another List kind", func(t *testing.T) {
		for _, min := range []int64{0, 4 << 20} {
			opts := defaultJSON()
			opts.streamMin = min
			dir := t.TempDir()
			item := `{"metadata":{"name":"p","namespace":"shop"},"status":{"podIP":"10.0.0.3","phase":"Running"}}`
			f := &File{Dir: dir, PodConverter: &snapshot.PodConverter{}, json: &opts}
			writeFiles(t, dir, map[string]string{"p.json": `{"apiVersion":"v1","kind":"List","items":[` + item + `]}`})
			if _, errs := readDir(t, f); len(errs) != 1 || !strings.Contains(errs[0], "no kind") {
				t.Errorf("an item without kind in a List: errors %q", errs)
			}
			writeFiles(t, dir, map[string]string{"p.json": `{"apiVersion":"v1","items":[` + item + `],"kind":"PodList"}`})
			o, errs := readDir(t, f)
			if errs != nil || len(o.ConvertedPods) != 1 || o.ConvertedPods[0].Object().Map()["status"].(map[string]any)["podIP"] != "10.0.0.3" {
				t.Errorf("the same item in a PodList: %v", errs)
			}
			writeFiles(t, dir, map[string]string{"p.json": `{"apiVersion":"v1","items":[` + item + `],"kind":"List"}`})
			if _, errs := readDir(t, f); len(errs) != 1 || !strings.Contains(errs[0], "no kind") {
				t.Errorf("back in a List: errors %q", errs)
			}
		}
	})
	f.DefaultNamespace = "other"
	writeFiles(t, dir, map[string]string{"copy.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`})
	o, errs := readDir(t, f)
	if errs != nil || len(o.ConfigMaps) != 1 || o.ConfigMaps[0].Namespace != "other" {
		t.Errorf("after a change of default namespace: %v %v", names(o), errs)
	}
}

// scanAgrees checks what the fast path makes of data against encoding/json: when the scanner
// accepts data and validItem every item (else the fast path gives up), encoding/json reads
// the same objects, heads and items.
func scanAgrees(t *testing.T, data []byte) {
	docs, ok := scanJSONFile(data)
	if !ok {
		return
	}
	type itemHead struct{ apiVersion, kind string }
	heads := map[span]itemHead{}
	for _, doc := range docs {
		for _, sp := range doc.items {
			h, ok := validItem(data, sp)
			if !ok {
				return
			}
			heads[sp] = itemHead{h.apiVersion, h.kind}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			if i != len(docs) {
				t.Fatalf("scanner found %d objects, encoding/json %d", len(docs), i)
			}
			return
		}
		if err != nil {
			t.Fatalf("scanner accepted what encoding/json rejects: %v", err)
		}
		if i >= len(docs) {
			t.Fatalf("encoding/json found more than the scanner's %d objects", len(docs))
		}
		doc := docs[i]
		if got := data[doc.start:doc.end]; !bytes.Equal(got, raw) {
			t.Fatalf("object %d: scanner %q, encoding/json %q", i, got, raw)
		}
		var h struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("object %d: scanner read a head encoding/json cannot: %v", i, err)
		}
		if h.APIVersion != doc.apiVersion || h.Kind != doc.kind {
			t.Fatalf("object %d: scanner head %q %q, encoding/json %q %q", i, doc.apiVersion, doc.kind, h.APIVersion, h.Kind)
		}
		if !doc.hasItems {
			continue
		}
		if len(h.Items) != len(doc.items) {
			t.Fatalf("object %d: scanner found %d items, encoding/json %d", i, len(doc.items), len(h.Items))
		}
		for k, sp := range doc.items {
			if !bytes.Equal(data[sp.start:sp.end], h.Items[k]) {
				t.Fatalf("object %d item %d: scanner %q, encoding/json %q", i, k, data[sp.start:sp.end], h.Items[k])
			}
			var ij struct{ APIVersion, Kind string }
			if err := json.Unmarshal(h.Items[k], &ij); err != nil || (itemHead{ij.APIVersion, ij.Kind}) != heads[sp] {
				t.Fatalf("item %d: scanner head %v, encoding/json %q %q (%v)", k, heads[sp], ij.APIVersion, ij.Kind, err)
			}
		}
	}
}

func FuzzScanJSON(f *testing.F) {
	for _, c := range jsonCorpus {
		f.Add([]byte(c))
	}
	data, err := os.ReadFile(filepath.Join("..", "examples", "local", "pods.yaml"))
	if err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { scanAgrees(t, data) })
}

// TestSkipObject: for valid objects, skipObject ends where the object ends.
func TestSkipObject(t *testing.T) {
	for _, c := range []string{`{}`, `{"a":"}"}`, `{"a":"\"}"}`, `{"a":"\\"}`, `{"a":"\\\""}`, `{"a":[{"b":"]"}],"c":{}}`, `{"a":"x\\\\\\\"}"}`} {
		t.Run(c, func(t *testing.T) {
			data := []byte(c + `,{"next":1}`)
			end, ok := skipObject(data, 0)
			if !ok || end != len(c) {
				t.Errorf("skipObject = %d, %v; want %d", end, ok, len(c))
			}
		})
	}
}

// TestSeenSetCollision: objects whose hashes collide are told apart.
func TestSeenSetCollision(t *testing.T) {
	cm := func(name string) objectKey { return objectKey{"ConfigMap", "lb", name} }
	// The jobs, by index: a at 1, b at 2, b again at 3.
	keys := map[int]objectKey{1: cm("a"), 2: cm("b"), 3: cm("b")}
	keyOf := func(i int) objectKey { return keys[i] }
	var s seenSet
	s.init(4)
	if _, dup := s.add(keys[1], 1, keyOf); dup {
		t.Fatal("a is new")
	}
	// Pretend b's hash is a's: move a's entry under b's hash.
	for k, v := range s.first {
		delete(s.first, k)
		s.first[seenHash(cm("b"))] = v
	}
	if prev, dup := s.add(keys[2], 2, keyOf); dup {
		t.Fatalf("b, whose hash a has, is reported defined at job %d", prev)
	}
	if prev, dup := s.add(keys[3], 3, keyOf); !dup || prev != 2 {
		t.Errorf("b again: first defined at job %d (duplicate %v), want job 2", prev, dup)
	}
}

func TestScanValue(t *testing.T) {
	cases := map[string]int{
		`"abc"x`: 5, `"a\"b"`: 6, `"a\\"b`: 5, `12,`: 2, `true}`: 4, `null `: 4, `[1,[2]]]`: 7,
		`12`: -1, `{"a":`: -1, `"abc`: -1, `"a\"`: -1, `[{"]":1}`: -1, ``: -1,
	}
	for in, want := range cases {
		if got := scanValue([]byte(in)); got != want {
			t.Errorf("scanValue(%q) = %d, want %d", in, got, want)
		}
	}
}
