package watcher

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// lockedBuffer is a log destination for several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestBigManifestChangeReadsOnlyIt: a big manifest of a kind nothing reads (Deployments), as a
// streamed JSON List and as multi-document YAML. Its objects are decoded once (strictly) and
// not kept: neither the cache nor the file's entry holds them. When one line is appended to it,
// that file alone is read again, and none of its objects is decoded again; when one of them
// changes, that one alone is.
func TestBigManifestChangeReadsOnlyIt(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			big := filepath.Join(dir, "unrelated."+format)
			size := int64(1 << 20)
			if format == "json" {
				size = 9 << 19 // over the streaming threshold (4 MiB)
			}
			writeUnrelated(t, big, size, format == "json")
			writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "a")})
			logs := &lockedBuffer{}
			f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{},
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				now:    func() time.Time { return time.Now().Add(time.Hour) }} // no file is racy
			const decodedIgnored = "ignoring an object that is not a ConfigMap"

			o := read(t, f)
			objects := logs.count(decodedIgnored)
			if !hasValue("services", "a")(o) || objects < 1000 || f.last.read != 2 {
				t.Fatalf("first read: %v, %d objects ignored, %d files read", names(o), objects, f.last.read)
			}
			if n := len(f.cache.entries); n > 1 {
				t.Errorf("the cache holds %d objects, want the services ConfigMap only", n)
			}
			if n := f.files[filepath.Base(big)].jobs.len(); n != 0 {
				t.Errorf("the big file's entry keeps %d objects, want none", n)
			}

			appended := "\n"
			if format == "yaml" {
				appended = "# appended\n"
			}
			fh, err := os.OpenFile(big, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString(appended); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			o = read(t, f)
			again := logs.count(decodedIgnored) - objects
			// What the file held is its start still: the JSON List gained whitespace only and
			// is not parsed again. The YAML file, under the size of a big file, is parsed
			// again, its documents known (TestBigYAMLChangeConvertsOnlyWhatChanged has one
			// over it); the comment belongs to the last document: that one is converted again.
			if want := map[string]int{"json": 0, "yaml": 1}[format]; !hasValue("services", "a")(o) || f.last.read != 1 || f.last.parsed != want {
				t.Errorf("a line appended: %v, %d files read, %d parsed; want the big file alone, %d parsed", names(o), f.last.read, f.last.parsed, want)
			}
			if want := map[string]int{"json": 0, "yaml": 1}[format]; again != want {
				t.Errorf("a line appended: %d objects decoded again, want %d", again, want)
			}

			touched := time.Now().Add(time.Minute)
			if err := os.Chtimes(big, touched, touched); err != nil {
				t.Fatal(err)
			}
			before := logs.count(decodedIgnored)
			read(t, f)
			if n := logs.count(decodedIgnored) - before; n != 0 || f.last.read != 1 || f.last.parsed != 0 {
				t.Errorf("touched: %d files read, %d parsed, %d objects decoded again; want it read (hashed) only", f.last.read, f.last.parsed, n)
			}

			// One Deployment changed, keeping the file's size, then changed again, growing it.
			for _, image := range []string{"app:Z", "app:seven"} {
				b, err := os.ReadFile(big)
				if err != nil {
					t.Fatal(err)
				}
				changed := bytes.Replace(b, []byte("registry.example.com/app:7"), []byte("registry.example.com/"+image), 1)
				if bytes.Equal(changed, b) {
					t.Fatal("no Deployment changed")
				}
				if err := os.WriteFile(big, changed, 0o644); err != nil {
					t.Fatal(err)
				}
				before := logs.count(decodedIgnored)
				read(t, f)
				if n := logs.count(decodedIgnored) - before; n != 1 {
					t.Errorf("one Deployment changed (%s): %d objects decoded again, want 1", image, n)
				}
			}
			if got := logs.count("level=ERROR") + logs.count("level=WARN"); got != 0 {
				t.Errorf("%d warnings or errors logged", got)
			}
		})
	}
}

// podsYAML is n pods in namespace other, as multi-document YAML or as one List document
// (kubectl get -o yaml); configMaps adds a ConfigMap item every 10 pods.
func podsYAML(n int, list, configMaps bool) string {
	var b strings.Builder
	if list {
		b.WriteString("apiVersion: v1\nitems:\n")
	}
	for i := range n {
		item := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-%05d\n  namespace: other\n  labels: {app: a%d}\n"+
			"spec:\n  containers:\n  - name: app\n    image: registry.example.com/app:%d\nstatus:\n  podIP: 10.200.0.1\n"+
			"  conditions: [{type: Ready, status: \"True\"}]\n", i, i, i)
		if configMaps && i%10 == 0 {
			item += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%05d\n  namespace: other\ndata:\n  key: v%d\n", i, i)
		}
		if !list {
			b.WriteString("---\n" + item)
			continue
		}
		for _, doc := range strings.Split(item, "---\n") {
			b.WriteString("- " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n")
		}
	}
	if list {
		b.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	}
	return b.String()
}

// TestBigYAMLChangeConvertsOnlyWhatChanged: a big YAML file of pods (and ConfigMaps), as
// documents and as one List document (kubectl get -o yaml). Read again after a line is
// appended or one object changed, only what changed is converted from YAML and decoded; the
// objects, their order and where each ConfigMap's keys are written are those a fresh read
// gives; the cache keeps one entry per object.
func TestBigYAMLChangeConvertsOnlyWhatChanged(t *testing.T) {
	for _, list := range []bool{false, true} {
		t.Run(map[bool]string{false: "documents", true: "List"}[list], func(t *testing.T) {
			dir := t.TempDir()
			big := filepath.Join(dir, "pods.yaml")
			const pods = 2000
			writeFiles(t, dir, map[string]string{"pods.yaml": podsYAML(pods, list, true), "services.yaml": configMapYAML("services", "a")})
			newSource := func() *File {
				return &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, Logger: testLogger(t),
					json: &jsonOptions{fast: true, streamMin: 64 << 10, streamBuf: 1 << 20}, // a big file, in a test's size
					now:  func() time.Time { return time.Now().Add(time.Hour) }}
			}
			same := func(t *testing.T, o *snapshot.Objects) {
				t.Helper()
				fresh := read(t, newSource())
				if got, want := names(o), names(fresh); !slices.Equal(got, want) || len(o.ConvertedPods) != len(fresh.ConvertedPods) {
					t.Fatalf("objects %d (%d pods), a fresh read gives %d (%d pods)", len(got), len(o.ConvertedPods), len(want), len(fresh.ConvertedPods))
				}
				for i, p := range o.ConvertedPods {
					if p.Name() != fresh.ConvertedPods[i].Name() {
						t.Fatalf("pod %d is %s, a fresh read gives %s", i, p.Name(), fresh.ConvertedPods[i].Name())
					}
				}
				if !reflect.DeepEqual(o.Origins, fresh.Origins) {
					t.Errorf("origins differ from a fresh read's")
				}
			}
			f := newSource()
			o := read(t, f)
			if len(o.ConvertedPods) != pods || len(o.ConfigMaps) != pods/10+1 {
				t.Fatalf("first read: %d pods, %d ConfigMaps", len(o.ConvertedPods), len(o.ConfigMaps))
			}
			if want := pods + pods/10 + 1; f.work.converted < want-1 || f.work.decoded != want {
				t.Fatalf("first read: %+v, want every object converted and decoded", f.work)
			}
			if n := len(f.cache.entries); n != pods+pods/10+1 {
				t.Errorf("the cache holds %d entries, want one per object (%d)", n, pods+pods/10+1)
			}

			// Touched (its stat changed, its bytes the same: what a racy file's next read
			// finds too): hashed, nothing parsed, and what a later append needs is kept.
			if err := os.Chtimes(big, time.Now(), time.Now().Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
			if read(t, f); f.last.read != 1 || f.last.parsed != 0 {
				t.Errorf("touched: %+v, want it read (hashed), not parsed", f.last)
			}

			fh, err := os.OpenFile(big, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString("# appended\n"); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			o = read(t, f)
			// A comment line after the last: no object changed, nothing is parsed.
			if f.last.read != 1 || f.last.parsed != 0 || f.work.documents != 0 {
				t.Errorf("a comment appended: %+v, %+v; want the file read, not parsed", f.last, f.work)
			}
			same(t, o)

			// An indented line may belong to the last document (it would to a block scalar).
			fh, err = os.OpenFile(big, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString("  # appended\n"); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			o = read(t, f)
			// The comment belongs to the last document (or the List's last line): that one
			// is converted again, and its object decoded; the documents before it, an
			// unchanged start of the file, are not even read (a List is one document).
			if f.last.parsed != 1 || f.work.converted > 1 || f.work.decoded > 1 {
				t.Errorf("a line appended: %+v, %+v; want one file parsed, at most one object converted and decoded", f.last, f.work)
			}
			if !list && f.work.documents != 1 {
				t.Errorf("a line appended: %d documents read, want the last one alone", f.work.documents)
			}
			same(t, o)

			// A document appended: it alone is read.
			fh, err = os.OpenFile(big, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: appended\n  namespace: other\ndata:\n  key: v\n"); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			o = read(t, f)
			if !list && (f.work.documents != 2 || f.work.converted != 1) {
				t.Errorf("a document appended: %+v, want the last one and the new one read, the new one converted", f.work)
			}
			if len(o.ConfigMaps) != pods/10+2 {
				t.Errorf("a document appended: %d ConfigMaps, want %d", len(o.ConfigMaps), pods/10+2)
			}
			same(t, o)

			b, err := os.ReadFile(big)
			if err != nil {
				t.Fatal(err)
			}
			changed := bytes.Replace(b, []byte("registry.example.com/app:7\n"), []byte("registry.example.com/app:seven\n"), 1)
			if bytes.Equal(changed, b) {
				t.Fatal("no pod changed")
			}
			if err := os.WriteFile(big, changed, 0o644); err != nil {
				t.Fatal(err)
			}
			o = read(t, f)
			if f.work.converted != 1 || f.work.decoded != 1 {
				t.Errorf("one pod changed: %+v, want it alone converted and decoded", f.work)
			}
			same(t, o)
			if n := len(f.cache.entries); n != pods+pods/10+2 {
				t.Errorf("the cache holds %d entries after the changes, want %d", n, pods+pods/10+2)
			}
		})
	}
}

// TestBigYAMLErrorsAsSmall: a big YAML file (documents, or one List document as kubectl get
// -o yaml prints it), read document by document and item by item, gives the errors and the
// objects a small file of the same bytes gives (read whole, as before the big-file paths):
// each bad document or item named by the file and the line of its document, whatever the
// path; and again once lines are appended to it.
func TestBigYAMLErrorsAsSmall(t *testing.T) {
	bad := []struct{ name, from, to string }{
		{"an unknown field", "name: app-00003\n", "name: app-00003\n  colour: blue\n"},
		{"no kind", "kind: Pod\nmetadata:\n  name: app-00005\n", "metadata:\n  name: app-00005\n"},
		{"invalid YAML", "name: app-00007\n", "name: [app-00007\n"},
		{"a duplicate", "name: app-00009\n", "name: app-00008\n"},
	}
	for _, list := range []bool{false, true} {
		for _, b := range bad {
			t.Run(fmt.Sprintf("%s/%s", map[bool]string{false: "documents", true: "List"}[list], b.name), func(t *testing.T) {
				text := podsYAML(40, list, true)
				if list && b.name == "no kind" {
					b.from, b.to = "  kind: Pod\n  metadata:\n    name: app-00005\n", "  metadata:\n    name: app-00005\n"
				}
				if !strings.Contains(text, b.from) {
					t.Fatalf("no %q", b.from)
				}
				text = strings.Replace(text, b.from, b.to, 1)
				read := func(streamMin int64) ([]string, []string) {
					dir := t.TempDir()
					writeFiles(t, dir, map[string]string{"pods.yaml": text, "services.yaml": configMapYAML("services", "a")})
					f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{},
						json: &jsonOptions{fast: true, streamMin: streamMin, streamBuf: 1 << 20}}
					o, errs := readDir(t, f)
					fh, err := os.OpenFile(filepath.Join(dir, "pods.yaml"), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					fh.WriteString("# appended\n")
					fh.Close()
					o2, errs2 := readDir(t, f)
					if !slices.Equal(errs, errs2) || (o == nil) != (o2 == nil) || (o != nil && !slices.Equal(names(o), names(o2))) {
						t.Errorf("streamMin %d: a line appended: errors %q, were %q", streamMin, errs2, errs)
					}
					if o == nil {
						return nil, errs
					}
					return names(o), errs
				}
				bigObjs, bigErrs := read(1 << 10)
				smallObjs, smallErrs := read(math.MaxInt64)
				if len(smallErrs) == 0 {
					t.Fatal("no error read whole")
				}
				if !slices.Equal(bigErrs, smallErrs) || !slices.Equal(bigObjs, smallObjs) {
					t.Errorf("read as a big file: errors\n%q\nread whole:\n%q\n(objects %d, %d)", bigErrs, smallErrs, len(bigObjs), len(smallObjs))
				}
			})
		}
	}
}

// TestOnlyComments: what a read after an append may skip parsing: comment lines at column 0
// only (an indented "#" line or an empty line can be text of a block scalar).
func TestOnlyComments(t *testing.T) {
	for in, want := range map[string]bool{
		"# a\n":          true,
		"# a\n#b\n":      true,
		"# no newline":   true,
		"  # indented\n": false,
		"\n":             false,
		"# a\n\n":        false,
		"# a\nkey: v\n":  false,
		"---\n":          false,
	} {
		if got := onlyComments([]byte(in)); got != want {
			t.Errorf("onlyComments(%q) = %v, want %v", in, got, want)
		}
	}
}
