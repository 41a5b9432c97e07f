package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fsnotify/fsnotify"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// File is a Source that reads Kubernetes manifests from a directory and watches it with
// fsnotify: the directory `kubectl apply -f DIR` would take (YAML .yaml/.yml with any number of
// documents, JSON .json, List kinds, `kubectl get -o yaml/json` output), recursively. Files and
// directories whose name starts with "." are skipped. Symbolic links are followed for files,
// and for directories at the top level only; names starting with ".." are never entered, so a
// mounted ConfigMap volume (files that are links into ..data/) is read once, through its links.
//
// Only ConfigMaps, Secrets, Pods and EndpointSlices are kept, and the objects of the watched
// resources (Watch); other kinds are ignored. A Secret's stringData is folded into data as the
// API server does.
//
// Each read parses only the files that changed since the last one: a file whose identity on
// disk (device, inode, size, modification and change times, through its links) is the same
// gives the objects it gave, with no read; a changed one is read, and parsed only if its bytes
// differ. A file is bad input when it does not decode or is larger than MaxFileSize: its error
// is reported, and the objects of its last good version stand in for it (none if it never was
// good). An object defined in two places keeps the definition the last read used; the other
// is an error in its file (duplicates.go). Which one was in use outlives the process through
// Choices (OnChoices, Remembered).
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
	// MaxFileSize bounds one manifest file (--max-file-size): a larger file is not read, and is
	// bad input. 0 means DefaultMaxFileSize; a negative value, no limit.
	MaxFileSize int64
	// SecretNamespace, when set, is the only namespace whose Secrets are all kept (the
	// sidecar's); in the others only the TLS Secrets (type kubernetes.io/tls) of
	// TLSSecretNamespaces are kept, the rest dropped as they are decoded and never held.
	// Empty: every Secret is kept. Neither changes once Objects has been called.
	SecretNamespace     string
	TLSSecretNamespaces snapshot.Namespaces
	// OnState, when set, is told whether Dir is watched, and why not (see Run).
	OnState StateFunc
	// Watch are the watched resources (--watch): objects of their kinds (by apiVersion and
	// kind; a custom resource's kind is its ;kind=, else the kind whose plural is the
	// resource's) are returned in Objects.Resources, converted and filtered by namespace and
	// selector. A built-in's object without a namespace gets DefaultNamespace unless its kind
	// is cluster-scoped; a custom resource's is kept as written.
	Watch watchspec.List
	// Remembered, when set, are the Choices of earlier reads (this sidecar's before a restart,
	// a running sidecar's for diff --live): the first read keeps the definitions they kept,
	// and a file they do not list is a newcomer. Not changed once Objects has been called.
	Remembered *Choices
	// OnChoices, when set, is given the reads' Choices whenever they change (not when they
	// are Remembered's), to keep them; when it fails, the error is logged and the Choices
	// are given again at the next read.
	OnChoices func(Choices) error

	objConv snapshot.ObjectConverter
	json    *jsonOptions // nil: defaultJSON(); tests set it

	stateOnce sync.Once
	state     *stateReport // what Run reported last
	// changes is what the watch saw change since the last Objects.
	changes changes

	mu    sync.Mutex
	cache *docCache // with PodConverter: what earlier calls decoded
	// scratch is what a read uses only while it runs, kept for the next.
	scratch readScratch
	// origins are what the last call's Objects.Origins were made of, and they.
	origins originsMemo
	// files is what the last call found in each file, by path relative to Dir.
	files   map[string]*fileEntry
	order   []string // the paths of files, in the order scan finds them
	filesNS string   // the default namespace files were decoded with
	last    readStats
	work    readWork
	now     func() time.Time // the clock racy stats are judged by; nil: time.Now
	// kept is, for each object the last read found defined more than once, the file whose
	// definition it kept: that one stays in use while its file defines the object.
	kept map[objectKey]string
	// done: a read completed, so that what came before the first (Remembered, After's base)
	// no longer counts.
	done bool
	// after, afterKept are the files and choices of the read After says the first follows.
	after     map[string]*fileEntry
	afterKept map[objectKey]string
	told      *Choices // what OnChoices was last given, or Remembered
}

// readStats count what the last call did, for the debug log and tests.
type readStats struct {
	files  int // manifests found
	looked int // whose stat was taken: all of them, or only those the watch named
	read   int // read (their stat changed)
	parsed int // parsed (their bytes changed)
}

// readWork is what the last call converted and decoded of the files it parsed, for the debug
// log and tests.
type readWork struct {
	documents int // YAML documents and List items read
	converted int // of them, converted to JSON
	byKey     int // big ConfigMaps and Secrets read key by key (yamldata.go)
	dataKeys  int // of their data keys, those converted (the others were known)
	decoded   int // objects decoded
}

// DefaultMaxFileSize is the default MaxFileSize: far above any ConfigMap or Secret (1 MiB in
// Kubernetes), twice the 61 MB List of 100,000 pods of docs/performance.md.
const DefaultMaxFileSize = 128 << 20

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

func (f *File) maxSize() int64 {
	switch {
	case f.MaxFileSize == 0:
		return DefaultMaxFileSize
	case f.MaxFileSize < 0:
		return math.MaxInt64
	}
	return f.MaxFileSize
}

// fileEntry is what a read of one file gave.
type fileEntry struct {
	file manifest // where it is
	stat fileStat
	// racy: the file changed too close to when it was read for its stat to tell a later
	// change within the same timestamp tick (same size): the next read reads it again.
	racy bool
	sum  uint64 // xxhash of the bytes (0 when not read: too big)
	size int64
	// jobs are the file's objects (and errors), decoded, without their bytes.
	jobs keptJobs
	bad  bool // some job is an error, or the file is too big
	// good are the jobs of the file's last version without errors; none if it never had one.
	good keptJobs
	// ignored are the objects of the file's last version that nothing reads (ignoredKeys).
	ignored map[docKey]string
	// revisionLine is what the file adds to the Revision's hash.
	revisionLine string
	// last is where the last document of a YAML file starts, and lastKept how many of jobs
	// come before it (-1: unknown): what a read after lines are appended parses again.
	last     lastDocument
	lastKept int
}

// fileStat identifies a version of a file on disk. The change time cannot be set by users, so
// a rewrite that keeps size and modification time still changes it.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// racyMargin: a file whose stat is this close to the time it is read is read again next time
// (timestamps have a granularity: a jiffy on Linux, up to 2 s on some file systems).
const racyMargin = 2 * time.Second

func statOf(fi fs.FileInfo) fileStat {
	st := fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	st.dev, st.ino, st.ctime = identity(fi) // per system: stat_linux.go, stat_darwin.go, stat_other.go
	return st
}

// contributionLen is how many jobs the file adds to a read (appendContribution).
func (e *fileEntry) contributionLen() int {
	if !e.bad {
		return e.jobs.len()
	}
	return e.good.len() + len(e.jobs.errs)
}

// appendContribution appends to dst what the file adds to a read: its objects, or for a bad
// file the objects of its last good version and its errors.
func (e *fileEntry) appendContribution(dst []job) []job {
	if !e.bad {
		return e.jobs.appendTo(dst, e.jobs.len())
	}
	dst = e.good.appendTo(dst, e.good.len())
	for _, x := range e.jobs.errs {
		dst = append(dst, x.job())
	}
	return dst
}

// keptJobs are a file's decoded jobs as its entry keeps them (see keep): the objects' results in
// order, their origins by runs (the items of a List share the List's: a 100,000-pod List keeps
// one pointer a pod) and the errors, each where it comes among the objects.
type keptJobs struct {
	// res are the results in chunks of keptChunk (the last one shorter), read-only once kept: a
	// later version of the file shares those whose results are the same (see keep).
	res  [][]*decoded
	n    int // results
	at   []originRun
	errs []keptError
}

// keptChunk is how many results a chunk of keptJobs.res holds: a pod edited in a List of
// 100,000 makes a chunk of 8 KB, not 0.8 MB of results again.
const keptChunk = 1024

// originRun: the objects from the previous run's end up to end (indexes in keptJobs.res) are
// at at.
type originRun struct {
	at  *origin
	end int
}

// keptError is an error job, after the first objects of keptJobs.res.
type keptError struct {
	at      *origin
	err     error
	objects int
}

func (x keptError) job() job { return job{at: x.at, p: &pending{err: x.err}} }

func (k *keptJobs) len() int { return k.n + len(k.errs) }

// result is the result of object i.
func (k *keptJobs) result(i int) *decoded { return k.res[i/keptChunk][i%keptChunk] }

// appendTo appends the first n jobs to dst, in their order.
func (k *keptJobs) appendTo(dst []job, n int) []job {
	dst = slices.Grow(dst, n)
	obj, errs, run := 0, 0, 0
	for range n {
		if errs < len(k.errs) && k.errs[errs].objects == obj {
			dst = append(dst, k.errs[errs].job())
			errs++
			continue
		}
		for k.at[run].end <= obj {
			run++
		}
		dst = append(dst, job{at: k.at[run].at, res: k.result(obj)})
		obj++
	}
	return dst
}

// keep is the decoded jobs as a fileEntry keeps them: results and errors, not the bytes they
// were decoded from (they may be slices of the whole file), and not the objects of kinds that
// are ignored (a big manifest of Deployments then costs nothing while it does not change; see
// ignoredKeys for when it does). before is how many of them come before jobs[boundary]. last,
// when set, is what the file's last version kept: its chunks of results that are the same
// are shared, not made again.
func keep(jobs []job, boundary int, last *keptJobs) (kept keptJobs, bad bool, before int) {
	total := countKept(jobs)
	kept.res = make([][]*decoded, 0, (total+keptChunk-1)/keptChunk) // sized once
	var results resultChunks
	before = -1
	for i, j := range jobs {
		if i == boundary {
			before = kept.len()
		}
		switch {
		case j.p != nil && j.p.err != nil:
			kept.errs = append(kept.errs, keptError{at: j.at, err: j.p.err, objects: kept.n})
			bad = true
		case keeps(j):
			if kept.n%keptChunk == 0 {
				results.start(last, len(kept.res), min(keptChunk, total-kept.n))
				kept.res = append(kept.res, nil)
			}
			kept.res[len(kept.res)-1] = results.add(j.res)
			kept.n++
			if n := len(kept.at); n > 0 && kept.at[n-1].at == j.at {
				kept.at[n-1].end = kept.n
			} else {
				kept.at = append(kept.at, originRun{at: j.at, end: kept.n})
			}
		}
	}
	if len(kept.res) > 0 {
		kept.res[len(kept.res)-1] = results.end()
	}
	if boundary == len(jobs) {
		before = kept.len()
	}
	kept.at, kept.errs = slices.Clip(kept.at), slices.Clip(kept.errs)
	return kept, bad, before
}

// resultChunks fills one chunk of keptJobs.res at a time: the last version's chunk at the
// same place while the results are the same (read-only: never written), else one of its own.
type resultChunks struct {
	chunk []*decoded
	last  []*decoded // the last version's chunk; nil once chunk is its own
	size  int        // the results the chunk will hold
}

// start begins chunk c, of size results, of a file whose last version kept last (nil: none).
func (r *resultChunks) start(last *keptJobs, c, size int) {
	r.last, r.size = nil, size
	if last != nil && c < len(last.res) {
		r.last = last.res[c]
		r.chunk = r.last[:0]
		return
	}
	r.chunk = make([]*decoded, 0, size)
}

// add adds a result to the chunk and returns it.
func (r *resultChunks) add(res *decoded) []*decoded {
	i := len(r.chunk)
	if r.last != nil && (i >= len(r.last) || r.last[i] != res) {
		r.own(i)
	}
	if r.last != nil {
		r.chunk = r.chunk[:i+1]
	} else {
		r.chunk = append(r.chunk, res)
	}
	return r.chunk
}

// own makes the chunk its own, with its first n results.
func (r *resultChunks) own(n int) {
	own := make([]*decoded, n, r.size)
	copy(own, r.chunk[:n])
	r.chunk, r.last = own, nil
}

// end ends the last chunk: one of the last version's ends there too, or it would hold the
// results that follow.
func (r *resultChunks) end() []*decoded {
	if r.last != nil && len(r.chunk) < len(r.last) {
		r.own(len(r.chunk))
	}
	return slices.Clip(r.chunk)
}

// keeps says that keep keeps the object of j: decoded, of a kind something reads.
func keeps(j job) bool {
	return (j.p == nil || (j.p.err == nil && !j.p.skip)) && j.res != nil && j.res.kind() != ""
}

// countKept is how many of jobs keep keeps as objects.
func countKept(jobs []job) int {
	n := 0
	for _, j := range jobs {
		if keeps(j) {
			n++
		}
	}
	return n
}

// Objects reads and decodes the manifests (those that changed since the last call). Revision
// is a hash of the files read and the default namespace. Bad files are *snapshot.InputError
// (Ref Kind "File", Name the path relative to Dir, with the line); all of them are reported,
// joined. With bad files, the objects are returned too: every good file's, and for each bad
// file those of its last good version.
func (f *File) Objects(ctx context.Context) (*snapshot.Objects, error) {
	log := f.logger()
	f.mu.Lock()
	defer f.mu.Unlock()
	dec := newManifestDecoder(f.DefaultNamespace, log)
	named, all := f.changes.take()
	complete := false
	defer func() {
		if !complete {
			f.changes.everything() // what was named may not have been read: look at all next time
		}
	}()
	files, err := f.toLook(named, all, dec.defaultNamespace, log)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	if err := f.prepare(dec); err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	if f.files == nil || f.filesNS != dec.defaultNamespace {
		f.files, f.filesNS, f.kept = map[string]*fileEntry{}, dec.defaultNamespace, nil
	}
	h := xxhash.New() // for the Revision: fast, and the same in every process
	fmt.Fprintf(h, "namespace %q\n", dec.defaultNamespace)
	f.last = readStats{files: len(files)}
	next := make(map[string]*fileEntry, len(files))
	order := make([]string, 0, len(files))
	var fresh []freshFile
	limit := f.maxSize()
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := len(dec.jobs)
		e, parsed, err := f.look(dec, file, limit, h)
		if err != nil {
			return nil, err
		}
		if e == nil {
			continue // vanished
		}
		next[file.rel] = e
		order = append(order, file.rel)
		if parsed {
			fresh = append(fresh, freshFile{start, len(dec.jobs), e, dec.ignoring.still, lastKept(f.files[file.rel])})
		}
	}
	f.last.files = len(next)
	dec.decodeJobs()
	if len(fresh) > 0 {
		dec.jobs = placeFresh(dec.jobs, fresh)
	}
	chosen := map[objectKey]string{}
	defined, kept := definedIn(f.files), f.kept
	if !f.done {
		defined, kept = f.earlier()
	}
	dec.prefer = preferKept(defined, kept, chosen)
	f.files, f.order = next, order
	f.last.parsed = len(fresh)
	f.work = readWork{documents: dec.documents, converted: dec.converted, byKey: dec.byKey, dataKeys: dec.dataKeys, decoded: int(dec.decoded.Load())}
	log.Debug("file source: read", "files", f.last.files, "read", f.last.read, "parsed", f.last.parsed,
		"yaml_documents", f.work.documents, "converted", f.work.converted, "read_by_key", f.work.byKey, "data_keys_converted", f.work.dataKeys, "decoded", f.work.decoded)
	jobs := len(dec.jobs)
	dec.addJobs()
	f.scratch.takeBack(dec, jobs)
	dec.origins(order)
	f.kept = chosen
	f.tell(log)
	objs := dec.objs
	objs.Revision = fmt.Sprintf("%016x", h.Sum64())
	complete, f.done = true, true
	switch len(dec.errs) {
	case 0:
		return &objs, nil
	case 1:
		return &objs, dec.errs[0]
	default:
		return &objs, errors.Join(dec.errs...)
	}
}

// After makes f's first read follow base's last one as if f had made both: the definitions
// base kept stay in use, and a file base did not read is a newcomer (diff --base reads the
// proposal as a change of the base). base is not read again.
func (f *File) After(base *File) {
	base.mu.Lock()
	files, kept := base.files, maps.Clone(base.kept)
	base.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after, f.afterKept = files, kept
}

// earlier is what the first read knows of the reads before it: After's base, else the
// Remembered choices, else nothing (the first definition in the order of the files is kept).
func (f *File) earlier() (defined func(rel string, k objectKey) bool, kept map[objectKey]string) {
	switch {
	case f.after != nil:
		return definedIn(f.after), f.afterKept
	case f.Remembered != nil:
		return definedInFiles(f.Remembered.Files), f.Remembered.kept()
	}
	return definedIn(nil), nil
}

// tell gives OnChoices the reads' Choices when they changed since it was last given them.
func (f *File) tell(log *slog.Logger) {
	if f.OnChoices == nil {
		return
	}
	if !f.done {
		f.told = f.Remembered
	}
	c := choicesOf(f.kept, f.files)
	if f.told.equal(c) {
		return
	}
	if err := f.OnChoices(c); err != nil {
		log.Warn("file source: keep which definition of each object defined twice is in use; tried again at the next read", "error", err)
		return
	}
	f.told = &c
}

// toLook are the manifests a read looks at: every one scan finds when all may have changed
// (no watch, or it lost track) or the default namespace did, else those the last read found
// and those the watch named (known).
func (f *File) toLook(named map[string]bool, all bool, namespace string, log *slog.Logger) ([]manifest, error) {
	if all || f.files == nil || f.filesNS != namespace {
		files, _, err := scan(f.root(), log)
		return files, err
	}
	return f.known(named), nil
}

// prepare sets dec up for a read as f is configured: the directory, the Secrets kept, the
// watched resources and the converters (a new round each), the cache of what was decoded.
func (f *File) prepare(dec *manifestDecoder) error {
	dec.dir = f.Dir
	dec.memo = &f.origins
	f.scratch.lend(dec)
	dec.secretNamespace, dec.tlsNamespaces = f.SecretNamespace, f.TLSSecretNamespaces
	if f.json != nil {
		dec.json = *f.json
	}
	if len(f.Watch) > 0 {
		var err error
		if dec.watched, err = resolve(f.Watch); err != nil {
			return err
		}
		dec.objConv = &f.objConv
		f.objConv.NextRound()
	}
	if f.PodConverter != nil {
		f.PodConverter.NextRound()
		dec.conv = f.PodConverter
		if f.cache == nil || f.cache.namespace != dec.defaultNamespace {
			f.cache = &docCache{namespace: dec.defaultNamespace, ignored: &decoded{}}
		}
		dec.cache = f.cache
	}
	return nil
}

// freshFile is a file a read parsed: its jobs are dec.jobs[start:end] until they are decoded
// and its entry takes them.
type freshFile struct {
	start, end int
	entry      *fileEntry
	still      map[docKey]string // its objects still ignored (ignored.go)
	last       *keptJobs         // what its last version kept (nil: none)
}

// lastKept is what e kept (nil e: nothing).
func lastKept(e *fileEntry) *keptJobs {
	if e == nil {
		return nil
	}
	return &e.jobs
}

// look adds the jobs of one file to dec, as its entry has them or as read now, and its line to
// the Revision's hash h. It returns the file's entry (nil: the file vanished), and whether the
// file was parsed now: its jobs are then decoded with the others before its entry takes them.
func (f *File) look(dec *manifestDecoder, file manifest, limit int64, h *xxhash.Digest) (e *fileEntry, parsed bool, err error) {
	if file.same {
		// Not named by the watch: as the last read found it.
		e = f.files[file.rel]
		dec.jobs = e.appendContribution(dec.jobs)
		fmt.Fprint(h, e.revisionLine)
		return e, false, nil
	}
	e, parsed, err = f.readFile(dec, file, limit)
	if errors.Is(err, fs.ErrNotExist) {
		dec.logger.Debug("file vanished while reading the directory", "file", file.rel)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("file source: read %s: %w", file.rel, err)
	}
	if !parsed {
		dec.jobs = e.appendContribution(dec.jobs)
	}
	if e.sum == 0 && e.bad {
		e.revisionLine = fmt.Sprintf("file %q %d too big %d\n", file.rel, e.size, e.stat.mtime)
	} else {
		e.revisionLine = fmt.Sprintf("file %q %d %016x\n", file.rel, e.size, e.sum)
	}
	fmt.Fprint(h, e.revisionLine)
	return e, parsed, nil
}

// placeFresh gives each file parsed now its decoded jobs, and puts them where the file is
// among the others: a bad file with the objects of its last good version. It places them in
// jobs itself when each file's part fits where its jobs were (always, but for a bad file whose
// last good version had more objects): a copy of the jobs of a List of 100,000 pods would be
// 2.4 MB more at the moment a read holds the most.
func placeFresh(jobs []job, fresh []freshFile) []job {
	fits, n, at := true, 0, 0
	for _, p := range fresh {
		p.entry.ignored = ignoredKeys(p.still, jobs[p.start:p.end])
		boundary := -1
		if p.entry.last.offset >= 0 {
			boundary = p.entry.last.job - p.start
		}
		p.entry.jobs, p.entry.bad, p.entry.lastKept = keep(jobs[p.start:p.end], boundary, p.last)
		if !p.entry.bad {
			p.entry.good = p.entry.jobs
		}
		// The entry's part is kept apart, never a part of jobs: what is written must never
		// pass what is still to be read.
		n += p.start - at + p.entry.contributionLen()
		fits = fits && n <= p.end
		at = p.end
	}
	out := jobs[:0]
	if !fits {
		out = make([]job, 0, n+len(jobs)-at)
	}
	at = 0
	for _, p := range fresh {
		out = append(out, jobs[at:p.start]...) // moved down in place: copy's semantics
		out = p.entry.appendContribution(out)
		at = p.end
	}
	out = append(out, jobs[at:]...)
	if fits {
		clear(jobs[len(out):]) // what is left holds pending decodes, their bytes among them
	}
	return out
}

// known is what a watched directory holds now that the watch named paths since the last read:
// the files of the last read in the order it kept (scan's: no sort on this path), those named
// added where scan would find them or looked at again,
// and the links looked at again (what they point to may be outside the watched directories).
// The others are marked same.
func (f *File) known(named map[string]bool) []manifest {
	files := make([]manifest, 0, len(f.order)+len(named))
	for _, rel := range f.order {
		e := f.files[rel]
		m := e.file
		m.same = !named[m.path] && !m.link && !e.racy
		files = append(files, m)
	}
	root := f.root()
	for p := range named {
		rel, err := filepath.Rel(root, p)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		rel = filepath.ToSlash(rel)
		if _, ok := f.files[rel]; ok {
			continue
		}
		i, _ := slices.BinarySearchFunc(files, rel, func(m manifest, rel string) int { return walkOrder(m.rel, rel) })
		files = slices.Insert(files, i, manifest{path: p, rel: rel})
	}
	return files
}

// walkOrder orders relative paths as scan finds them: name by name (a directory's files come
// where its name sorts among its siblings: "a/x.yaml" before "a.yaml").
func walkOrder(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// changes is what the watch saw change since the last read, so that a read looks only at the
// manifests it named: a stat of each of 1,000 files is a third of the read otherwise.
type changes struct {
	mu       sync.Mutex
	watching bool            // a watch runs: a file it did not name did not change
	all      bool            // look at everything: a directory, a link swapped, a lost event
	paths    map[string]bool // manifests the watch named
}

// watch tells whether a watch runs; a watch that starts has seen nothing yet: everything is
// looked at.
func (c *changes) watch(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watching, c.all, c.paths = on, true, nil
}

// file notes a manifest the watch named.
func (c *changes) file(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths == nil {
		c.paths = map[string]bool{}
	}
	c.paths[path] = true
}

// everything notes a change whose files are not known.
func (c *changes) everything() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = true
}

// take returns what changed since it was last called, and forgets it; all is true when every
// file must be looked at (also when no watch runs).
func (c *changes) take() (paths map[string]bool, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	paths, all = c.paths, c.all || !c.watching
	c.paths, c.all = nil, false
	return paths, all
}

// readFile finds what a file holds now: the entry of the last read when the file is the same
// (read false), or a new entry whose jobs dec holds from start on (read true, to be completed
// once decoded). A file over limit is not read: its entry has its error and the objects of its
// last good version.
func (f *File) readFile(dec *manifestDecoder, file manifest, limit int64) (e *fileEntry, read bool, err error) {
	f.last.looked++
	fi, err := os.Stat(file.path)
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	if f.now != nil {
		now = f.now()
	}
	st := statOf(fi)
	old := f.files[file.rel]
	if old != nil && old.stat == st && !old.racy {
		return old, false, nil
	}
	e = &fileEntry{file: file, stat: st, size: st.size, racy: max(st.mtime, st.ctime) > now.Add(-racyMargin).UnixNano(),
		last: lastDocument{offset: -1}, lastKept: -1}
	if old != nil {
		e.good = old.good
	}
	if st.size > limit {
		e.bad = true
		e.jobs = keptJobs{errs: []keptError{{at: &origin{rel: file.rel}, err: inputError(file.rel, 0, 0, tooBig(st.size, limit))}}}
		return e, false, nil
	}
	f.last.read++
	if old != nil && old.sum != 0 && st.size == old.size && st.size >= dec.json.streamMin {
		// A big file of the same size (touched, racy, rewritten): hashed first, through a
		// small buffer, so that the same bytes cost no copy of the file.
		if sum, err := hashFile(file.path, limit); err == nil && sum == old.sum {
			e.sum = sum
			e.sameAs(old)
			return e, false, nil
		}
	}
	dec.ignoring.still = nil
	if old != nil && old.ignored != nil {
		dec.ignoring.before = append(dec.ignoring.before, old.ignored)
	}
	start := len(dec.jobs)
	if old != nil && st.size > old.size {
		if parsed, ok := f.appended(dec, file, old, e, limit); ok {
			return e, parsed, nil
		}
		dec.jobs, dec.ignoring.still = dec.jobs[:start], nil
	}
	sum, size, data, err := readManifest(dec, file, limit)
	if errors.Is(err, errTooBig) {
		dec.jobs = dec.jobs[:start]
		e.bad, e.size = true, size
		e.jobs = keptJobs{errs: []keptError{{at: &origin{rel: file.rel}, err: inputError(file.rel, 0, 0, tooBig(size, limit))}}}
		return e, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	e.sum, e.size = sum, size
	if old != nil && old.sum != 0 && old.sum == sum && old.size == size {
		// Touched, or rewritten with the same bytes: what it gave before.
		dec.jobs = dec.jobs[:start] // what the streaming path found already
		e.sameAs(old)
		return e, false, nil
	}
	if data != nil {
		dec.file(file.rel, data)
		if !strings.HasSuffix(file.rel, ".json") {
			e.last = dec.lastDoc
		}
	}
	return e, true, nil
}

// appended reads a big file that grew since the last read when what it held then is still
// its start, byte for byte (lines appended: `echo >>`, a tool adding objects at the end): the
// objects of that part are kept as they were and only the rest is parsed. YAML from the start
// of the last document on (what is appended may go on with it); a JSON file, when only
// whitespace was appended, not at all. The part kept is hashed through a small buffer, never
// held. parsed says that dec has the file's jobs from the read's start on, to be decoded (else
// e has them); ok is false when this does not apply (changed elsewhere, CRLFs, JSON that
// gained more than whitespace, a last version with errors): the caller reads the file whole.
func (f *File) appended(dec *manifestDecoder, file manifest, old, e *fileEntry, limit int64) (parsed, ok bool) {
	isJSON := strings.HasSuffix(file.rel, ".json")
	switch {
	case old.sum == 0 || old.bad || old.size < dec.json.streamMin || e.size > limit:
		return false, false
	case !isJSON && (old.last.offset < 0 || old.lastKept < 0 || int64(old.last.offset) > old.size):
		return false, false
	}
	from := old.size // what is parsed again starts here
	if !isJSON {
		from = int64(old.last.offset)
	}
	fh, err := os.Open(file.path)
	if err != nil {
		return false, false
	}
	defer fh.Close()
	// What the file held, hashed through a small buffer; then what was appended.
	h := xxhash.New()
	if n, err := io.CopyN(h, fh, old.size); err != nil || n != old.size || h.Sum64() != old.sum {
		return false, false // not lines appended: changed before the end
	}
	r := &limitReader{r: fh, left: limit - old.size}
	tail, err := readAll(r, e.size-old.size)
	if err != nil || r.over {
		return false, false
	}
	h.Write(tail)
	e.sum, e.size = h.Sum64(), old.size+int64(len(tail))
	if isJSON {
		if len(bytes.TrimSpace(tail)) > 0 {
			return false, false
		}
		e.sameAs(old)
		return false, true
	}
	var lastByte [1]byte
	if _, err := fh.ReadAt(lastByte[:], old.size-1); err != nil {
		return false, false
	}
	if lastByte[0] == '\n' && onlyComments(tail) {
		// Comments after a complete last line change no object: nothing is parsed (a List,
		// one document, would be read whole again).
		e.sameAs(old)
		return false, true
	}
	rest := make([]byte, old.size-from, old.size-from+int64(len(tail)))
	if _, err := fh.ReadAt(rest, from); err != nil {
		return false, false
	}
	rest = append(rest, tail...)
	if bytes.IndexByte(rest, '\r') >= 0 {
		return false, false
	}
	// The objects before the last document as they were (what they had that nothing reads
	// too), then the rest read.
	dec.ignoring.still = maps.Clone(old.ignored)
	dec.jobs = old.jobs.appendTo(dec.jobs, old.lastKept)
	dec.yamlFileAt(file.rel, rest, int(from), old.last.line)
	e.last = dec.lastDoc
	return true, true
}

// onlyComments says whether b is YAML comment lines alone, each starting with "#" at column 0.
// Such a line is a comment wherever a valid document ends (a block scalar, the one place a "#"
// line can be text, needs its lines indented under a key); an empty line is not taken: it would
// lengthen a block scalar kept with "|+".
func onlyComments(b []byte) bool {
	for len(b) > 0 {
		if b[0] != '#' {
			return false
		}
		b = b[min(lineEnd(b, 0)+1, len(b)):]
	}
	return true
}

// sameAs gives e, a new version of a file whose objects are those of old (its bytes, or what
// a read parses of them, the same), what old had of them; where its last YAML document starts
// too, or a later append would parse the whole file again.
func (e *fileEntry) sameAs(old *fileEntry) {
	e.jobs, e.bad, e.ignored = old.jobs, old.bad, old.ignored
	e.last, e.lastKept = old.last, old.lastKept
}

// errTooBig: the file grew over the limit while it was read.
var errTooBig = errors.New("file too big")

func tooBig(size, limit int64) error {
	return fmt.Errorf("the file is %s (%d bytes), more than --max-file-size %s: it is not read, and the objects it had when last read (if ever) are kept",
		humanSize(size), size, humanSize(limit))
}

// humanSize writes a size in the largest binary unit it has at least one of.
func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', -1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// readManifest reads one file, of at most limit bytes: a big JSON file goes into dec through
// the streaming path (data nil), any other is returned whole (data) for dec.file. It returns
// the hash and size of what it read; errTooBig (with the size read so far) past the limit.
func readManifest(dec *manifestDecoder, file manifest, limit int64) (sum uint64, size int64, data []byte, err error) {
	fh, err := os.Open(file.path)
	if err != nil {
		return 0, 0, nil, err
	}
	defer fh.Close()
	r := &limitReader{r: fh, left: limit}
	if strings.HasSuffix(file.rel, ".json") {
		if fi, err := fh.Stat(); err == nil && fi.Size() >= dec.json.streamMin {
			sum, size, err = dec.streamJSON(file.rel, r)
			if r.over {
				return 0, limit + 1, nil, errTooBig
			}
			if !errors.Is(err, errBail) {
				return sum, size, nil, err
			}
			if _, err := fh.Seek(0, io.SeekStart); err != nil {
				return 0, 0, nil, err
			}
			r = &limitReader{r: fh, left: limit}
		}
	}
	var hint int64
	if fi, err := fh.Stat(); err == nil {
		hint = min(fi.Size(), limit)
	}
	data, err = readAll(r, hint)
	if r.over {
		return 0, limit + 1, nil, errTooBig
	}
	if err != nil {
		return 0, 0, nil, err
	}
	return xxhash.Sum64(data), int64(len(data)), data, nil
}

// hashFile is the xxhash of a file of at most limit bytes, read through a small buffer.
func hashFile(path string, limit int64) (uint64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	h := xxhash.New()
	r := &limitReader{r: fh, left: limit}
	if _, err := io.Copy(h, r); err != nil {
		return 0, err
	}
	if r.over {
		return 0, errTooBig
	}
	return h.Sum64(), nil
}

// readAll is io.ReadAll into a buffer of the file's size: a 100 MB manifest is not copied
// from smaller buffers as it grows.
func readAll(r io.Reader, hint int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// limitReader reads at most left bytes, then reports over (and EOF) if there is more.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.over = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// Run watches Dir and every directory scan enters, adding watches as directories appear, and
// calls changed for every event that can change what Objects reads. When Dir cannot be watched
// (it is removed or moved away, or is not there at start), the source is down: that is
// reported (OnState and a log line), Dir is looked for every dirPoll, and once it is back it
// is watched again, reported up, and changed is called. Run returns only when ctx ends.
func (f *File) Run(ctx context.Context, changed func()) error {
	for {
		err := f.watch(ctx, changed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.report(false, err)
		if !f.awaitDir(ctx) {
			return ctx.Err()
		}
	}
}

// dirPoll is how often a directory that cannot be watched is looked for: its return is seen
// within this, well inside the 2 s in which what changed meanwhile must go live.
const dirPoll = 250 * time.Millisecond

// report tells OnState and the log whether Dir is watched.
func (f *File) report(up bool, why error) {
	f.stateOnce.Do(func() { f.state = &stateReport{fn: f.OnState, log: f.logger()} })
	f.state.set(up, why,
		"file source: cannot watch the directory; HAProxy keeps serving what it runs, and the directory is looked for until it is back",
		"file source: watching the directory again", "dir", f.Dir)
}

// awaitDir waits until Dir can be read again (at least one dirPoll); false when ctx ended.
func (f *File) awaitDir(ctx context.Context) bool {
	t := time.NewTicker(dirPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if _, err := os.ReadDir(f.root()); err == nil {
			return true
		}
	}
}

// watch watches Dir until ctx ends (nil) or Dir can no longer be watched (why).
func (f *File) watch(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
	}
	defer w.Close()
	ws := &watchSet{w: w, root: f.root(), log: f.logger(), dirs: map[string]bool{}}
	if err := ws.sync(); err != nil {
		return fmt.Errorf("file source: watch %s: %w", f.Dir, err)
	}
	f.changes.watch(true)
	defer f.changes.watch(false)
	f.report(true, nil)
	changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("file source: watch %s: fsnotify stopped", f.Dir)
			}
			if ev.Name == ws.root && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				return fmt.Errorf("file source: watch %s: the directory was removed or moved", f.Dir)
			}
			if !ws.relevant(ev) {
				ws.log.Debug("file source: ignoring event", "event", ev.String())
				continue
			}
			ws.log.Debug("file source: change", "event", ev.String())
			switch ws.reads(ev) { // before sync forgets a directory removed
			case readsFile:
				f.changes.file(ev.Name)
			case readsAll:
				f.changes.everything()
			}
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
			f.changes.everything()
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

// What an event makes the next read look at.
const (
	readsNothing = iota // a name removed that was neither a manifest nor a watched directory
	readsFile           // one manifest file, the event's
	readsAll            // anything else: a directory, a link, the kubelet's ..data swap
)

// reads is what an event makes the next read look at (see the consts). It must be asked
// before sync forgets the directory an event removed.
func (ws *watchSet) reads(ev fsnotify.Event) int {
	base := filepath.Base(ev.Name)
	removed := ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	switch {
	case ev.Name == ws.root, strings.HasPrefix(base, "."), ws.dirs[ev.Name]:
		return readsAll
	case !isManifest(base):
		if removed {
			return readsNothing // a watched directory, a top-level link to one included, is in dirs
		}
		return readsAll
	case removed:
		return readsFile
	}
	if fi, err := os.Lstat(ev.Name); err == nil && fi.Mode().IsRegular() {
		return readsFile
	}
	return readsAll
}

// mayChangeDirs: events after which the set of directories to watch may differ.
func (ws *watchSet) mayChangeDirs(ev fsnotify.Event) bool {
	return ev.Has(fsnotify.Create) || ws.dirs[ev.Name] || strings.HasPrefix(filepath.Base(ev.Name), "..")
}

// manifest is a file scan found: its path to read and its path relative to the root.
type manifest struct {
	path, rel string
	link      bool // a link: what it points to may change without an event here
	same      bool // (known) as the last read found it: the watch named it not
}

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
				files = append(files, manifest{path: p, rel: r, link: link})
			}
		}
		return nil
	}
	if err := walk(root, "", true); err != nil {
		return nil, nil, err
	}
	return files, dirs, nil
}
