package watcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// volume writes a directory the way the kubelet's atomic writer projects a ConfigMap volume:
// the data in a timestamped directory ..2006_01_02_15_04_05.NNN, the link ..data to it, and
// for each top-level path a link "name -> ..data/name".
type volume struct {
	t   *testing.T
	dir string
	n   int
}

func newVolume(t *testing.T, dir string, payload map[string]string) *volume {
	v := &volume{t: t, dir: dir}
	v.write(payload)
	return v
}

// write performs the atomic writer's steps in its order: new timestamped directory with the
// payload, links for new top-level paths, ..data_tmp link, rename over ..data, removal of the
// top-level links of paths gone, removal of the old timestamped directory.
func (v *volume) write(payload map[string]string) {
	t := v.t
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(v.dir, "..data")
	oldTs, err := os.Readlink(dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	v.n++
	ts, err := os.MkdirTemp(v.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	must(err)
	must(os.Chmod(ts, 0o755))
	newTop := map[string]bool{}
	for p, content := range payload {
		full := filepath.Join(ts, p)
		must(os.MkdirAll(filepath.Dir(full), 0o755))
		must(os.WriteFile(full, []byte(content), 0o644))
		newTop[strings.Split(p, "/")[0]] = true
	}
	for top := range newTop {
		link := filepath.Join(v.dir, top)
		if _, err := os.Readlink(link); errors.Is(err, os.ErrNotExist) {
			must(os.Symlink(filepath.Join("..data", top), link))
		}
	}
	must(os.Symlink(filepath.Base(ts), filepath.Join(v.dir, "..data_tmp")))
	must(os.Rename(filepath.Join(v.dir, "..data_tmp"), dataDir))
	if oldTs != "" {
		entries, err := os.ReadDir(filepath.Join(v.dir, oldTs))
		must(err)
		for _, e := range entries {
			if !newTop[e.Name()] {
				must(os.Remove(filepath.Join(v.dir, e.Name())))
			}
		}
		must(os.RemoveAll(filepath.Join(v.dir, oldTs)))
	}
}

// harness runs a File source on a directory and lets a test wait for changed().
type harness struct {
	t       *testing.T
	f       *File
	changed chan struct{}
	done    chan error
	cancel  context.CancelFunc
}

const deadline = 10 * time.Second

func startWatch(t *testing.T, dir string) *harness {
	t.Helper()
	return startWatchWith(t, &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t)}, true)
}

// startWatchWith runs f; with watching, it waits for the first changed(), which says the watch
// is set up.
func startWatchWith(t *testing.T, f *File, watching bool) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{
		t:       t,
		f:       f,
		changed: make(chan struct{}, 1),
		done:    make(chan error, 1),
		cancel:  cancel,
	}
	go func() {
		h.done <- h.f.Run(ctx, func() {
			select {
			case h.changed <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(deadline):
			t.Error("Run did not return after cancel")
		}
	})
	if !watching {
		return h
	}
	// Run calls changed() once the watch is set up.
	select {
	case <-h.changed:
	case err := <-h.done:
		t.Fatalf("Run returned %v", err)
	case <-time.After(deadline):
		t.Fatal("no changed() after Run started")
	}
	return h
}

// drain forgets earlier changed() calls.
func (h *harness) drain() {
	select {
	case <-h.changed:
	default:
	}
}

// waitFor waits for changed() calls until Objects satisfies ok; it fails at the deadline.
func (h *harness) waitFor(what string, ok func(*snapshot.Objects) bool) {
	h.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case <-h.changed:
			o, err := h.f.Objects(context.Background())
			if err == nil && ok(o) {
				return
			}
		case err := <-h.done:
			h.t.Fatalf("Run returned %v while waiting for %s", err, what)
		case <-timeout:
			o, err := h.f.Objects(context.Background())
			h.t.Fatalf("no changed() after which %s (objects now %v, err %v)", what, names(o), err)
		}
	}
}

func configMapYAML(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// value is the "value" key of ConfigMap lb/name, or "" when there is none.
func value(o *snapshot.Objects, name string) (string, bool) {
	for _, c := range o.ConfigMaps {
		if c.Namespace == "lb" && c.Name == name {
			return c.Data["value"], true
		}
	}
	return "", false
}

func hasValue(name, want string) func(*snapshot.Objects) bool {
	return func(o *snapshot.Objects) bool {
		v, ok := value(o, name)
		return ok && v == want
	}
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name  string
		setup map[string]string // files before Run
		op    func(t *testing.T, dir string)
		want  string
		check func(*snapshot.Objects) bool
	}{
		{
			name:  "edit in place",
			setup: map[string]string{"services.yaml": configMapYAML("services", "v1")},
			op: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "v2")})
			},
			want:  "services has v2",
			check: hasValue("services", "v2"),
		},
		{
			name:  "write a temporary file and rename it over the original",
			setup: map[string]string{"services.yaml": configMapYAML("services", "v1")},
			op: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{".services.yaml.swp": configMapYAML("services", "v2")})
				if err := os.Rename(filepath.Join(dir, ".services.yaml.swp"), filepath.Join(dir, "services.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			want:  "services has v2",
			check: hasValue("services", "v2"),
		},
		{
			name:  "backup by rename, then write a new file (vim without backupcopy)",
			setup: map[string]string{"services.yaml": configMapYAML("services", "v1")},
			op: func(t *testing.T, dir string) {
				if err := os.Rename(filepath.Join(dir, "services.yaml"), filepath.Join(dir, "services.yaml~")); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "v2")})
			},
			want:  "services has v2",
			check: hasValue("services", "v2"),
		},
		{
			name: "create a file",
			op: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"config.json": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"config"},"data":{"value":"new"}}`})
			},
			want:  "config appears",
			check: hasValue("config", "new"),
		},
		{
			name:  "delete a file",
			setup: map[string]string{"a.yaml": configMapYAML("a", "x"), "b.yaml": configMapYAML("b", "x")},
			op: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
					t.Fatal(err)
				}
			},
			want: "a is gone",
			check: func(o *snapshot.Objects) bool {
				_, a := value(o, "a")
				_, b := value(o, "b")
				return !a && b
			},
		},
		{
			name:  "file in a new subdirectory",
			setup: map[string]string{"a.yaml": configMapYAML("a", "x")},
			op: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"new/deeper/b.yaml": configMapYAML("b", "x")})
			},
			want:  "b appears",
			check: hasValue("b", "x"),
		},
		{
			name:  "edit in an existing subdirectory",
			setup: map[string]string{"sub/a.yaml": configMapYAML("a", "v1")},
			op: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"sub/a.yaml": configMapYAML("a", "v2")})
			},
			want:  "a has v2",
			check: hasValue("a", "v2"),
		},
		{
			name:  "remove a subdirectory",
			setup: map[string]string{"sub/a.yaml": configMapYAML("a", "v1"), "b.yaml": configMapYAML("b", "x")},
			op: func(t *testing.T, dir string) {
				if err := os.RemoveAll(filepath.Join(dir, "sub")); err != nil {
					t.Fatal(err)
				}
			},
			want: "a is gone",
			check: func(o *snapshot.Objects) bool {
				_, a := value(o, "a")
				return !a
			},
		},
		{
			name:  "rename a subdirectory to a hidden name",
			setup: map[string]string{"sub/a.yaml": configMapYAML("a", "v1"), "b.yaml": configMapYAML("b", "x")},
			op: func(t *testing.T, dir string) {
				if err := os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, ".sub")); err != nil {
					t.Fatal(err)
				}
			},
			want: "a is gone",
			check: func(o *snapshot.Objects) bool {
				_, a := value(o, "a")
				return !a
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.setup)
			h := startWatch(t, dir)
			h.drain()
			tt.op(t, dir)
			h.waitFor(tt.want, tt.check)
		})
	}
}

// TestWatchNewSubdirectoryIsWatched: after a directory appears, edits inside it are seen.
func TestWatchNewSubdirectoryIsWatched(t *testing.T) {
	dir := t.TempDir()
	h := startWatch(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the directory is seen", func(*snapshot.Objects) bool { return true })
	for i := range 3 {
		h.drain()
		v := fmt.Sprint("v", i)
		writeFiles(t, dir, map[string]string{"sub/a.yaml": configMapYAML("a", v)})
		h.waitFor("a has "+v, hasValue("a", v))
	}
}

// TestWatchConfigMapVolumeFlat: with only top-level keys, the ..data swap is the only event.
func TestWatchConfigMapVolumeFlat(t *testing.T) {
	dir := t.TempDir()
	vol := newVolume(t, dir, map[string]string{"services.yaml": configMapYAML("services", "v1")})
	h := startWatch(t, dir)
	for _, v := range []string{"v2", "v3"} {
		h.drain()
		vol.write(map[string]string{"services.yaml": configMapYAML("services", v)})
		h.waitFor("services has "+v, hasValue("services", v))
	}
}

// TestWatchConfigMapVolume updates a directory as the kubelet updates a mounted ConfigMap.
func TestWatchConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	vol := newVolume(t, dir, map[string]string{
		"services.yaml":   configMapYAML("services", "v1"),
		"nested/cfg.yaml": configMapYAML("config", "v1"),
	})
	h := startWatch(t, dir)
	steps := []struct {
		name    string
		payload map[string]string
		check   func(*snapshot.Objects) bool
	}{
		{
			name: "content changes",
			payload: map[string]string{
				"services.yaml":   configMapYAML("services", "v2"),
				"nested/cfg.yaml": configMapYAML("config", "v2"),
			},
			check: func(o *snapshot.Objects) bool {
				return hasValue("services", "v2")(o) && hasValue("config", "v2")(o)
			},
		},
		{
			name: "a key is added",
			payload: map[string]string{
				"services.yaml":   configMapYAML("services", "v2"),
				"nested/cfg.yaml": configMapYAML("config", "v2"),
				"extra.yaml":      configMapYAML("extra", "v1"),
			},
			check: hasValue("extra", "v1"),
		},
		{
			name:    "keys are removed",
			payload: map[string]string{"services.yaml": configMapYAML("services", "v3")},
			check: func(o *snapshot.Objects) bool {
				_, extra := value(o, "extra")
				_, cfg := value(o, "config")
				return hasValue("services", "v3")(o) && !extra && !cfg
			},
		},
		{
			name:    "a nested key comes back",
			payload: map[string]string{"services.yaml": configMapYAML("services", "v3"), "nested/cfg.yaml": configMapYAML("config", "v4")},
			check:   hasValue("config", "v4"),
		},
	}
	for _, s := range steps {
		h.drain()
		vol.write(s.payload)
		h.waitFor(s.name, s.check)
		o, err := h.f.Objects(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := len(o.ConfigMaps); n != len(s.payload) {
			t.Errorf("%s: %d ConfigMaps, want %d (each read once, through the links)", s.name, n, len(s.payload))
		}
	}
	// The watch follows the swapped nested directory: edits there would come with a swap,
	// so another swap of only the nested file must be seen too.
	h.drain()
	vol.write(map[string]string{"services.yaml": configMapYAML("services", "v3"), "nested/cfg.yaml": configMapYAML("config", "v5")})
	h.waitFor("config has v5", hasValue("config", "v5"))
}

// states records what a source reported through OnState.
type states struct {
	mu   sync.Mutex
	seen []error // nil: up
	ch   chan struct{}
}

func newStates() *states { return &states{ch: make(chan struct{}, 1)} }

func (s *states) report(up bool, why error) {
	s.mu.Lock()
	if up {
		why = nil
	} else if why == nil {
		why = errors.New("down, no reason given")
	}
	s.seen = append(s.seen, why)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// await waits until the last state reported is up (want nil) or down with a reason ok accepts.
func (s *states) await(t *testing.T, what string, ok func(why error) bool) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		s.mu.Lock()
		var last error
		n := len(s.seen)
		if n > 0 {
			last = s.seen[n-1]
		}
		s.mu.Unlock()
		if n > 0 && ok(last) {
			return
		}
		select {
		case <-s.ch:
		case <-timeout:
			t.Fatalf("not reported: %s (reported: %v)", what, s.seen)
		}
	}
}

func isUp(why error) bool { return why == nil }

// TestRunDirectoryAway: a directory missing at start, or removed or moved away later, does not
// end Run: the source is reported down with why, and once the directory is back it is watched
// again, reported up, and changed is called (what it holds then is read).
func TestRunDirectoryAway(t *testing.T) {
	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing")
		st := newStates()
		h := startWatchWith(t, &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), OnState: st.report}, false)
		st.await(t, "a not-exist error", func(why error) bool { return why != nil && errors.Is(why, os.ErrNotExist) })
		writeFiles(t, dir, map[string]string{"config.yaml": configMapYAML("config", "v1")})
		st.await(t, "up once the directory is there", isUp)
		h.waitFor("config has v1", hasValue("config", "v1"))
	})
	for _, how := range []string{"removed", "moved"} {
		t.Run("directory "+how, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "watched")
			writeFiles(t, dir, map[string]string{"config.yaml": configMapYAML("config", "v1")})
			st := newStates()
			h := startWatchWith(t, &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), OnState: st.report}, true)
			if o := read(t, h.f); !hasValue("config", "v1")(o) {
				t.Fatalf("objects %v, want config v1", names(o))
			}
			st.await(t, "up", isUp)
			var err error
			if how == "removed" {
				err = os.RemoveAll(dir)
			} else {
				err = os.Rename(dir, filepath.Join(parent, "elsewhere"))
			}
			if err != nil {
				t.Fatal(err)
			}
			st.await(t, "an error about the directory", func(why error) bool {
				return why != nil && strings.Contains(why.Error(), "removed or moved") && strings.Contains(why.Error(), dir)
			})
			if _, err := h.f.Objects(context.Background()); err == nil {
				t.Error("Objects reads a directory that is gone")
			}
			writeFiles(t, dir, map[string]string{"config.yaml": configMapYAML("config", "v2")})
			st.await(t, "up once the directory is back", isUp)
			h.waitFor("config has v2", hasValue("config", "v2"))
			// Watched again: a later change is seen.
			writeFiles(t, dir, map[string]string{"config.yaml": configMapYAML("config", "v3")})
			h.waitFor("config has v3", hasValue("config", "v3"))
		})
	}
}

func TestRelevant(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/a.yaml": "", "README": ""})
	ws := &watchSet{root: dir, dirs: map[string]bool{dir: true, filepath.Join(dir, "sub"): true, filepath.Join(dir, "gone"): true}}
	create, write, remove := fsnotify.Create, fsnotify.Write, fsnotify.Remove
	tests := []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{"a.yaml", write, true}, {"sub/b.yml", create, true}, {"c.json", fsnotify.Chmod, true},
		{"..data", create, true}, {"..data_tmp", fsnotify.Rename, true}, {"..2024_05_01_10_00_00.123", remove, true},
		{"sub", create, true},  // a directory
		{"gone", remove, true}, // a watched directory that is no more
		{"link", remove, true}, // maybe a link to a directory
		{".a.yaml.swp", write, false}, {"sub/.x.yaml", create, false}, {".x", remove, false},
		{"README", write, false}, {"a.yaml~", create, false}, {"4913", create, false},
	}
	for _, tt := range tests {
		t.Run(tt.op.String()+" "+tt.name, func(t *testing.T) {
			ev := fsnotify.Event{Name: filepath.Join(dir, tt.name), Op: tt.op}
			if got := ws.relevant(ev); got != tt.want {
				t.Errorf("relevant(%s) = %v, want %v", ev, got, tt.want)
			}
		})
	}
}

func TestScanLinks(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"x.yaml": "", "inner/y.yaml": ""})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/z.yaml": ""})
	links := map[string]string{
		"top-dir":           outside,                             // followed: top level
		"top-file.yaml":     filepath.Join(outside, "x.yaml"),    // followed
		"sub/deep-dir":      filepath.Join(outside, "inner"),     // not followed: below the top
		"sub/deep-file.yml": filepath.Join(outside, "x.yaml"),    // followed: a file
		"dangling.yaml":     filepath.Join(outside, "none.yaml"), // skipped
		"loop":              ".",                                 // followed once, no loop
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	files, dirs, err := scan(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, f := range files {
		rels = append(rels, f.rel)
	}
	want := []string{"loop/sub/deep-file.yml", "loop/sub/z.yaml", "loop/top-file.yaml", "sub/deep-file.yml", "sub/z.yaml",
		"top-dir/inner/y.yaml", "top-dir/x.yaml", "top-file.yaml"}
	slices.Sort(rels)
	if !slices.Equal(rels, want) {
		t.Errorf("files = %v\nwant    %v", rels, want)
	}
	if dirs[0] != dir || len(dirs) != 6 {
		t.Errorf("dirs = %v", dirs)
	}
}
