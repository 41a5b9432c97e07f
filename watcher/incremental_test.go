package watcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// read calls Objects and fails the test on an error.
func read(t *testing.T, f *File) *snapshot.Objects {
	t.Helper()
	o, err := f.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestObjectsParsesOnlyWhatChanged: a read parses the files whose bytes changed, reads (and
// hashes) the files whose stat changed, and neither reads nor parses the others; the objects
// and the revision are what a fresh source would give.
func TestObjectsParsesOnlyWhatChanged(t *testing.T) {
	for _, conv := range []bool{false, true} {
		t.Run(fmt.Sprintf("pod converter %v", conv), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"a.yaml":     configMapYAML("a", "1"),
				"b.yaml":     configMapYAML("b", "1"),
				"sub/c.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"value":"1"}}`,
			})
			newSource := func() *File {
				// Files written long before they are read: their stat tells their version.
				f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), now: func() time.Time { return time.Now().Add(time.Hour) }}
				if conv {
					f.PodConverter = &snapshot.PodConverter{}
				}
				return f
			}
			f := newSource()
			same := func(t *testing.T, o *snapshot.Objects) {
				t.Helper()
				fresh := read(t, newSource())
				if got, want := names(o), names(fresh); !slices.Equal(got, want) || o.Revision != fresh.Revision {
					t.Fatalf("objects %v revision %s, a fresh source gives %v %s", got, o.Revision, want, fresh.Revision)
				}
			}
			read(t, f)
			if f.last != (readStats{files: 3, looked: 3, read: 3, parsed: 3}) {
				t.Fatalf("first read: %+v", f.last)
			}
			o := read(t, f)
			if f.last != (readStats{files: 3, looked: 3}) {
				t.Fatalf("nothing changed: %+v", f.last)
			}
			same(t, o)

			writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("b", "22")}) // another size: another stat
			o = read(t, f)
			if f.last != (readStats{files: 3, looked: 3, read: 1, parsed: 1}) {
				t.Fatalf("b edited: %+v", f.last)
			}
			if v, _ := value(o, "b"); v != "22" {
				t.Fatalf("b = %q", v)
			}
			same(t, o)

			writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("b", "22")}) // same bytes
			o = read(t, f)
			if f.last.read > 1 || f.last.parsed != 0 { // not read at all if in the same timestamp tick
				t.Fatalf("b rewritten with the same bytes: %+v", f.last)
			}
			same(t, o)

			if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"d.yaml": configMapYAML("d", "1")})
			o = read(t, f)
			if _, ok := value(o, "a"); ok || f.last.parsed != 1 {
				t.Fatalf("a removed, d added: a still there %v, %+v", ok, f.last)
			}
			same(t, o)
		})
	}
}

// TestObjectsSeesRewritesWithinOneTimestampTick: a file rewritten in place with the same size
// right after a read (within the granularity of file timestamps, so with the same stat) is
// read again, not taken from the last read.
func TestObjectsSeesRewritesWithinOneTimestampTick(t *testing.T) {
	dir := t.TempDir()
	f := &File{Dir: dir, DefaultNamespace: "lb"}
	for i := range 300 {
		v := fmt.Sprintf("%04d", i) // same size every time
		writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("a", v)})
		if got, _ := value(read(t, f), "a"); got != v {
			t.Fatalf("rewrite %d: a = %q, want %q", i, got, v)
		}
	}
}

// TestObjectsFileSizeLimit: a file over MaxFileSize is not read and is bad input that names
// the file, its size and the flag; the objects it held when last read stay, the other files'
// changes come through, and once it is small again it is read.
func TestObjectsFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"big.yaml": configMapYAML("big", "v1"), "other.yaml": configMapYAML("other", "v1")})
	f := &File{Dir: dir, DefaultNamespace: "lb", MaxFileSize: 1000}
	read(t, f)

	writeFiles(t, dir, map[string]string{
		"big.yaml":   configMapYAML("big", strings.Repeat("x", 2000)),
		"other.yaml": configMapYAML("other", "v2"),
	})
	o, err := f.Objects(context.Background())
	var ie *snapshot.InputError
	if !errors.As(err, &ie) || ie.Ref != (snapshot.Ref{Kind: "File", Name: "big.yaml"}) {
		t.Fatalf("error %v, want an InputError for big.yaml", err)
	}
	size := len(configMapYAML("big", strings.Repeat("x", 2000)))
	for _, want := range []string{fmt.Sprintf("%d bytes", size), "--max-file-size 1000 B", "the objects it had when last read (if ever) are kept"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if v, _ := value(o, "big"); v != "v1" {
		t.Errorf("big = %q, want its last good v1", v)
	}
	if v, _ := value(o, "other"); v != "v2" {
		t.Errorf("other = %q, want v2", v)
	}
	if f.last.parsed != 1 {
		t.Errorf("%+v: only other.yaml parsed", f.last)
	}

	t.Run("a new file over the limit has no objects", func(t *testing.T) {
		writeFiles(t, dir, map[string]string{"new.yaml": configMapYAML("new", strings.Repeat("y", 2000))})
		o, err := f.Objects(context.Background())
		if err == nil || !strings.Contains(err.Error(), "new.yaml") {
			t.Fatalf("error %v", err)
		}
		if _, ok := value(o, "new"); ok {
			t.Error("an object of a file never read")
		}
		os.Remove(filepath.Join(dir, "new.yaml"))
	})
	t.Run("the limit holds while the file is read too (it may grow after its stat)", func(t *testing.T) {
		_, size, _, err := readManifest(newManifestDecoder("lb", testLogger(t)), manifest{path: filepath.Join(dir, "big.yaml"), rel: "big.yaml"}, 100)
		if !errors.Is(err, errTooBig) || size != 101 {
			t.Fatalf("size %d, error %v", size, err)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		writeFiles(t, dir, map[string]string{"big.yaml": configMapYAML("big", "v3")})
		if v, _ := value(read(t, f), "big"); v != "v3" {
			t.Fatalf("big = %q, want v3", v)
		}
	})
	t.Run("default limit", func(t *testing.T) {
		if (&File{}).maxSize() != DefaultMaxFileSize || (&File{MaxFileSize: -1}).maxSize() < 1<<60 {
			t.Fatal("MaxFileSize 0 is the default, a negative one no limit")
		}
	})
}

// TestObjectsBadFileKeepsItsLastGoodObjects: a file that does not decode is reported, and the
// objects of its last good version stand in for it; other files go on; fixed, it is read.
func TestObjectsBadFileKeepsItsLastGoodObjects(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "v1"), "other.yaml": configMapYAML("other", "v1")})
	f := &File{Dir: dir, DefaultNamespace: "lb"}
	read(t, f)
	writeFiles(t, dir, map[string]string{"services.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services\n", "other.yaml": configMapYAML("other", "v2")})
	for range 2 { // the second read takes both from the last one
		o, err := f.Objects(context.Background())
		var ie *snapshot.InputError
		if !errors.As(err, &ie) || ie.Ref.Name != "services.yaml" {
			t.Fatalf("error %v, want one for services.yaml", err)
		}
		if v, _ := value(o, "services"); v != "v1" {
			t.Fatalf("services = %q, want its last good v1", v)
		}
		if v, _ := value(o, "other"); v != "v2" {
			t.Fatalf("other = %q, want v2", v)
		}
	}
	writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "v3")})
	if v, _ := value(read(t, f), "services"); v != "v3" {
		t.Fatalf("services = %q after the fix", v)
	}
}

// TestObjectsRacyStat: a file read within racyMargin of its last change is read again at the
// next read even when its stat is the same (a rewrite of the same size within one timestamp
// tick, on a file system whose timestamps are coarse), and only such a file.
func TestObjectsRacyStat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	f := &File{Dir: dir, DefaultNamespace: "lb"}
	// rewrite writes a new value of the same size and makes the last read's stat of the file
	// equal to the new one, as a rewrite within the same tick of a coarse clock leaves it.
	rewrite := func(v string) {
		t.Helper()
		writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("a", v)})
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.files["a.yaml"].stat = statOf(fi)
		f.mu.Unlock()
	}
	writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("a", "0001")})
	read(t, f)
	rewrite("0002")
	if v, _ := value(read(t, f), "a"); v != "0002" || f.last.read != 1 {
		t.Fatalf("a = %q (%+v), want 0002 read again", v, f.last)
	}
	// Read long after it changed, the stat is trusted: a same-tick rewrite cannot happen then.
	f.now = func() time.Time { return time.Now().Add(time.Hour) }
	writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("a", "0003")})
	read(t, f)
	rewrite("0004")
	if o := read(t, f); f.last.read != 0 {
		t.Fatalf("%+v: a file changed long ago read again (a = %v)", f.last, names(o))
	}
}

// TestAWatchedReadLooksOnlyAtWhatTheWatchNamed: while the directory is watched, a read after
// one file changed takes the stat of that file alone, not of the others; a new directory (a
// change whose files the event does not name) makes the next read look at everything.
func TestAWatchedReadLooksOnlyAtWhatTheWatchNamed(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("cm-%02d.yaml", i)] = configMapYAML(fmt.Sprintf("cm-%02d", i), "1")
	}
	writeFiles(t, dir, files)
	// Files written long before they are read: their stat tells their version.
	f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), now: func() time.Time { return time.Now().Add(time.Hour) }}
	h := startWatchWith(t, f, true)
	read(t, f)
	if f.last.looked != 20 {
		t.Fatalf("first read of a watch: looked at %d files, want all 20", f.last.looked)
	}
	h.drain()
	writeFiles(t, dir, map[string]string{"cm-07.yaml": configMapYAML("cm-07", "2")})
	h.waitFor("cm-07 = 2", func(o *snapshot.Objects) bool {
		v, _ := value(o, "cm-07")
		return v == "2"
	})
	// Each read looks at the files named since the read before: the one changed, and at most
	// one named by a late event of the change before.
	if f.last.looked > 2 || f.last.files != 20 {
		t.Errorf("cm-07 edited: looked at %d of %d files, want cm-07 alone", f.last.looked, f.last.files)
	}
	if err := os.Remove(filepath.Join(dir, "cm-03.yaml")); err != nil {
		t.Fatal(err)
	}
	h.waitFor("cm-03 gone", func(o *snapshot.Objects) bool { _, ok := value(o, "cm-03"); return !ok })
	if f.last.looked > 2 || f.last.files != 19 {
		t.Errorf("cm-03 removed: looked at %d of %d files, want the removed one alone", f.last.looked, f.last.files)
	}
	writeFiles(t, dir, map[string]string{"sub/new.yaml": configMapYAML("new", "1")})
	h.waitFor("new in a new directory", func(o *snapshot.Objects) bool { _, ok := value(o, "new"); return ok })
	if f.last.files != 20 {
		t.Errorf("a file in a new directory: %d files, want 20", f.last.files)
	}
	same := read(t, &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t)})
	if o := read(t, f); o.Revision != same.Revision || !slices.Equal(names(o), names(same)) {
		t.Errorf("watched reads give %v (revision %s), a fresh source %v (%s)", names(o), o.Revision, names(same), same.Revision)
	}
}

// TestWalkOrderIsScanOrder: the files a watched read adds take the place a scan gives them
// (the first definition of an object defined twice is the one kept).
func TestWalkOrderIsScanOrder(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for _, name := range []string{"a/x.yaml", "a.yaml", "a-b.yaml", "b/c/d.yaml", "b.json", "b/c.yaml", "A.yml", "a/b/c.yaml", "ab.yaml"} {
		files[name] = configMapYAML("x", "1")
	}
	writeFiles(t, dir, files)
	scanned, _, err := scan(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, m := range scanned {
		rels = append(rels, m.rel)
	}
	sorted := slices.Clone(rels)
	slices.Reverse(sorted)
	slices.SortFunc(sorted, walkOrder)
	if !slices.Equal(sorted, rels) {
		t.Errorf("walkOrder sorts %v, scan finds %v", sorted, rels)
	}
}
