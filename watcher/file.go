package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/fsnotify/fsnotify"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

// File is a Source that reads Kubernetes manifests from a directory and watches it with
// fsnotify: the directory `kubectl apply -f DIR` would take (YAML .yaml/.yml with any number of
// documents, JSON .json, List kinds, `kubectl get -o yaml/json` output), recursively. Files and
// directories whose name starts with "." are skipped. Symbolic links are followed for files,
// and for directories at the top level only; names starting with ".." are never entered, so a
// mounted ConfigMap volume (files that are links into ..data/) is read once, through its links.
//
// Only ConfigMaps, Secrets, Pods and EndpointSlices are kept; other kinds are ignored. A
// Secret's stringData is folded into data as the API server does.
type File struct {
	// Dir is the directory to read.
	Dir string
	// DefaultNamespace is the namespace of objects that name none. Empty means "default", as
	// kubectl; the sidecar passes its --namespace, so that manifests without a namespace land
	// in the load balancer's namespace.
	DefaultNamespace string
	// Logger gets what is skipped and why; nil discards.
	Logger *slog.Logger
	// PodConverter, when set, makes Objects convert pods as it decodes them and return them
	// as Objects.ConvertedPods, keeping no typed Pods: a hundred thousand pods then take a
	// fraction of the memory. It also makes Objects remember what it decoded, so that the
	// next call decodes only the objects whose bytes changed (in any file).
	PodConverter *snapshot.PodConverter

	mu    sync.Mutex
	cache *docCache // with PodConverter: what earlier calls decoded
}

var _ Source = (*File)(nil)

// NewFile returns a File source for dir.
func NewFile(dir string, logger *slog.Logger) *File {
	return &File{Dir: dir, Logger: logger}
}

func (f *File) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

func (f *File) root() string { return filepath.Clean(f.Dir) }

// Objects reads and decodes every manifest. Revision is a hash of the files read and the
// default namespace. Bad files are *snapshot.InputError (Ref Kind "File", Name the path
// relative to Dir, with the line); all of them are reported, joined.
func (f *File) Objects(ctx context.Context) (*snapshot.Objects, error) {
	log := f.logger()
	files, _, err := scan(f.root(), log)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	dec := newManifestDecoder(f.DefaultNamespace, log)
	if f.PodConverter != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.PodConverter.NextRound()
		dec.conv = f.PodConverter
		if f.cache == nil || f.cache.namespace != dec.defaultNamespace {
			f.cache = &docCache{namespace: dec.defaultNamespace}
		}
		dec.cache = f.cache
	}
	h := xxhash.New() // for the Revision: fast, and the same in every process
	fmt.Fprintf(h, "namespace %q\n", dec.defaultNamespace)
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum, size, err := readManifest(dec, file)
		if errors.Is(err, fs.ErrNotExist) {
			log.Debug("file vanished while reading the directory", "file", file.rel)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("file source: read %s: %w", file.rel, err)
		}
		fmt.Fprintf(h, "file %q %d %016x\n", file.rel, size, sum)
	}
	dec.finish()
	switch len(dec.errs) {
	case 0:
	case 1:
		return nil, dec.errs[0]
	default:
		return nil, errors.Join(dec.errs...)
	}
	objs := dec.objs
	objs.Revision = fmt.Sprintf("%016x", h.Sum64())
	return &objs, nil
}

// readManifest reads one file into dec, big JSON files through the streaming path, and
// returns the hash and size of what it read.
func readManifest(dec *manifestDecoder, file manifest) (sum uint64, size int64, err error) {
	if strings.HasSuffix(file.rel, ".json") {
		if fi, err := os.Stat(file.path); err == nil && fi.Size() >= streamMin {
			f, err := os.Open(file.path)
			if err != nil {
				return 0, 0, err
			}
			sum, size, err = dec.streamJSON(file.rel, f)
			f.Close()
			if !errors.Is(err, errBail) {
				return sum, size, err
			}
		}
	}
	data, err := os.ReadFile(file.path)
	if err != nil {
		return 0, 0, err
	}
	dec.file(file.rel, data)
	return xxhash.Sum64(data), int64(len(data)), nil
}

// Run watches Dir and every directory scan enters, adding watches as directories appear, and
// calls changed for every event that can change what Objects reads. It returns an error when a
// watch cannot be set up or Dir itself goes away.
func (f *File) Run(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
	}
	defer w.Close()
	ws := &watchSet{w: w, root: f.root(), log: f.logger(), dirs: map[string]bool{}}
	if err := ws.sync(); err != nil {
		return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
	}
	changed()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("file source: watch %s: fsnotify stopped", f.Dir)
			}
			if ev.Name == ws.root && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				changed()
				return fmt.Errorf("file source: watch %s: the directory was removed or moved", f.Dir)
			}
			if !ws.relevant(ev) {
				ws.log.Debug("file source: ignoring event", "event", ev.String())
				continue
			}
			ws.log.Debug("file source: change", "event", ev.String())
			if ws.mayChangeDirs(ev) {
				if err := ws.sync(); err != nil {
					return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
				}
			}
			changed()
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("file source: watch %s: fsnotify stopped", f.Dir)
			}
			// An overflow loses events: read everything again.
			ws.log.Warn("file source: watch error; rescanning", "dir", f.Dir, "err", err)
			if err := ws.sync(); err != nil {
				return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
			}
			changed()
		}
	}
}

// watchSet keeps an fsnotify watch on every directory scan enters.
type watchSet struct {
	w    *fsnotify.Watcher
	root string
	log  *slog.Logger
	dirs map[string]bool
}

// sync watches the directories scan enters now and forgets the others. It adds a watch even
// for a path already watched: the path may now be another directory (a top-level link into a
// ConfigMap volume's ..data after a swap), and fsnotify re-points the watch.
func (ws *watchSet) sync() error {
	_, dirs, err := scan(ws.root, ws.log)
	if err != nil {
		return err
	}
	now := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		if err := ws.w.Add(d); err != nil {
			if d != ws.root && errors.Is(err, fs.ErrNotExist) {
				continue // gone already; its parent's event brings us back here
			}
			return fmt.Errorf("watch directory %s: %w", d, err)
		}
		now[d] = true
	}
	for d := range ws.dirs {
		if !now[d] {
			_ = ws.w.Remove(d) // usually removed by fsnotify already, with the directory
		}
	}
	ws.dirs = now
	return nil
}

// relevant: an event about a manifest, a directory, the kubelet's ..data swap, or the removal
// of any name that is not hidden.
func (ws *watchSet) relevant(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	switch {
	case ev.Name == ws.root, strings.HasPrefix(base, ".."):
		return true
	case strings.HasPrefix(base, "."):
		return false // editor swap files, hidden files
	case isManifest(base), ws.dirs[ev.Name]:
		return true
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		return true // it may have been a link to a directory: no way to tell now
	}
	fi, err := os.Stat(ev.Name)
	return err == nil && fi.IsDir()
}

// mayChangeDirs: events after which the set of directories to watch may differ.
func (ws *watchSet) mayChangeDirs(ev fsnotify.Event) bool {
	return ev.Has(fsnotify.Create) || ws.dirs[ev.Name] || strings.HasPrefix(filepath.Base(ev.Name), "..")
}

// manifest is a file scan found: its path to read and its path relative to the root.
type manifest struct{ path, rel string }

func isManifest(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// scan lists the manifests under root (sorted by path) and the directories it enters (root
// first). It skips names starting with "."; it follows links to files anywhere and links to
// directories at the top level (a ConfigMap volume's entries are links into ..data).
func scan(root string, log *slog.Logger) (files []manifest, dirs []string, err error) {
	var walk func(dir, rel string, top bool) error
	walk = func(dir, rel string, top bool) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !top && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we looked
			}
			return fmt.Errorf("read directory %s: %w", dir, err)
		}
		dirs = append(dirs, dir)
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p, r := filepath.Join(dir, name), path.Join(rel, name)
			typ := e.Type()
			link := typ&fs.ModeSymlink != 0
			if link {
				fi, err := os.Stat(p)
				if err != nil {
					log.Debug("file source: skipping a link that does not resolve", "file", r, "err", err)
					continue
				}
				typ = fi.Mode().Type()
			}
			switch {
			case typ.IsDir():
				if link && !top {
					log.Debug("file source: not following a link to a directory below the top level", "file", r)
					continue
				}
				if err := walk(p, r, false); err != nil {
					return err
				}
			case typ.IsRegular() && isManifest(name):
				files = append(files, manifest{path: p, rel: r})
			}
		}
		return nil
	}
	if err := walk(root, "", true); err != nil {
		return nil, nil, err
	}
	return files, dirs, nil
}
