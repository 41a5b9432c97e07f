package watcher

import (
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The streaming fast path for big JSON files made of one List (what `kubectl get -o json`
// and hack/gen-scale write): the file goes through a window of a few megabytes instead of
// being held whole, and only the items that are not in the cache are kept (copied) for
// decoding. Everything but the items is validated as in the in-memory fast path; an item is
// valid when the cache knows its bytes, or when validItem says so. On anything else the
// caller reads the file whole, as for any other file.

// errBail: the streaming path gives up; the file is read whole instead.
var errBail = errors.New("not for the streaming path")

// window is a sliding view of a file: buf[mark:n] are bytes still needed, pos the next byte.
type window struct {
	r    io.Reader
	buf  []byte
	n    int
	pos  int
	mark int // the start of what must be kept when more is read
	eof  bool
	err  error
	sum  *xxhash.Digest // of every byte read
	size int64          // bytes read
	nl   int            // newlines before buf[0], while counted (the List's line)
}

// more reads more bytes, keeping buf[mark:]; false at the end of the file or on an error.
func (w *window) more() bool {
	if w.eof || w.err != nil {
		return false
	}
	if w.mark > 0 {
		copy(w.buf, w.buf[w.mark:w.n])
		w.n -= w.mark
		w.pos -= w.mark
		w.mark = 0
	}
	if w.n == len(w.buf) {
		w.buf = append(w.buf, make([]byte, len(w.buf))...)
	}
	k, err := w.r.Read(w.buf[w.n:])
	if k > 0 {
		_, _ = w.sum.Write(w.buf[w.n : w.n+k])
		w.size += int64(k)
		w.n += k
	}
	switch {
	case errors.Is(err, io.EOF):
		w.eof = true
	case err != nil:
		w.err = err
	}
	return k > 0 || (!w.eof && w.err == nil)
}

// peek returns the byte at pos, reading more if needed.
func (w *window) peek() (byte, bool) {
	for w.pos >= w.n {
		if !w.more() {
			return 0, false
		}
	}
	return w.buf[w.pos], true
}

func (w *window) ws() {
	w.mark = w.pos
	for {
		c, ok := w.peek()
		if !ok {
			return
		}
		switch c {
		case ' ', '\t', '\r':
		case '\n':
			w.nl++
		default:
			return
		}
		w.pos++
	}
}

// value returns the bytes of the JSON value at pos (delimited, not validated) and moves past
// it. The bytes are valid until the next read.
func (w *window) value() ([]byte, bool) {
	if _, ok := w.peek(); !ok {
		return nil, false
	}
	w.mark = w.pos
	for {
		if end := scanValue(w.buf[w.pos:w.n]); end >= 0 {
			w.pos += end
			return w.buf[w.mark:w.pos], true
		}
		if !w.more() {
			// A number or literal may end the file; anything else is cut short.
			if c := w.buf[w.pos]; w.eof && w.err == nil && c != '{' && c != '[' && c != '"' {
				w.pos = w.n
				return w.buf[w.mark:w.pos], true
			}
			return nil, false
		}
	}
}

// expect moves past byte c, the next one.
func (w *window) expect(c byte) bool {
	if b, ok := w.peek(); !ok || b != c {
		return false
	}
	w.pos++
	return true
}

// listRead is what streamJSON keeps of a List's items besides their jobs, which it adds to
// d.jobs as it reads them (a job and, for an item the cache does not know, its pending decode:
// nothing else per item, as a List may have a hundred thousand). The List's kind, which gives
// its items their key prefix and, to items without one, their kind, may come after them
// (kubectl writes "kind" last): what depends on it is settled by settle, once it is known.
type listRead struct {
	start int     // the List's first job in d.jobs
	where *origin // where the List starts: every item's origin (no positions of keys)
	items int     // items read
	// ignored are the items nothing read in the file's last version (ignored.go), with the
	// List kind prefix they had: they make no job.
	ignored []ignoredItem
	// late are the items that name no apiVersion or kind: theirs come from the List's.
	late []lateItem
}

type ignoredItem struct {
	key    docKey
	prefix string
}

type lateItem struct {
	job              int // in d.jobs
	apiVersion, kind string
	hasItems         bool
}

// earlyDecoder decodes objects while the rest of the file is still being read, on all CPUs,
// and drops their bytes: a cold start of a 61 MB List (or of a 100 MB YAML file) would
// otherwise hold every object's bytes until the end of the file. Objects whose kind comes
// from their List's (a typed List, whose kind may come after its items) wait for finish, as
// before. At most a few hundred wait to be decoded: reading waits for the decoders.
type earlyDecoder struct {
	d    *manifestDecoder
	work chan func()
	wg   sync.WaitGroup
}

func (d *manifestDecoder) newEarlyDecoder() *earlyDecoder {
	e := &earlyDecoder{d: d, work: make(chan func(), 256)}
	for range runtime.GOMAXPROCS(0) {
		e.wg.Go(func() {
			for f := range e.work {
				f()
			}
		})
	}
	return e
}

// decode starts decoding p (an object that names its own kind); p.res is set, and p.data
// dropped, if the fast decode succeeds (decodeJobs does the rest).
func (e *earlyDecoder) decode(p *pending) {
	e.work <- func() {
		if p.res = e.d.fastDecode(p); p.res != nil {
			p.data = nil
		}
	}
}

// wait ends the decoding: every offered item has its result (or its bytes, if the fast
// decode failed) once it returns.
func (e *earlyDecoder) wait() {
	if e.work == nil {
		return
	}
	close(e.work)
	e.wg.Wait()
	e.work = nil
}

// streamJSON reads the List in r, adding a job for each item as it reads it. It returns the
// file's hash and size, or errBail (or a read error), having added nothing, when the file must
// be read whole.
func (d *manifestDecoder) streamJSON(rel string, r io.Reader) (sum uint64, size int64, err error) {
	buf := d.window // the last read's, when it did not grow
	if len(buf) != d.json.streamBuf {
		buf = make([]byte, d.json.streamBuf)
	}
	w := &window{r: r, buf: buf, sum: xxhash.New()}
	defer func() {
		clear(w.buf) // a dropped Secret's bytes are not kept
		if len(w.buf) == d.json.streamBuf {
			d.window = w.buf
		}
	}()
	l := &listRead{start: len(d.jobs)}
	early := d.newEarlyDecoder()
	defer early.wait() // when it bails; wait is idempotent
	bail := func() (uint64, int64, error) {
		early.wait() // the decoders write to the pending decodes of the jobs dropped
		clear(d.jobs[l.start:])
		d.jobs = d.jobs[:l.start]
		if w.err != nil {
			return 0, 0, w.err
		}
		return 0, 0, errBail
	}
	w.ws()
	l.where = &origin{rel: rel, line: 1 + w.nl} // streamed: big files of pods, no positions of keys
	if !w.expect('{') {
		return bail()
	}
	if d.cache != nil {
		if n := d.cache.listItems[rel]; n > 0 {
			d.jobs = slices.Grow(d.jobs, n+n/64)
		}
	}
	h, ok := d.streamMembers(w, l, early)
	if !ok {
		return bail()
	}
	w.ws()
	if _, ok := w.peek(); ok || w.err != nil {
		return bail() // more after the List
	}
	gvk, ok := scannedGVK(h, nil)
	if !ok || !h.hasItems || !isList(gvk.Kind, true) {
		return bail()
	}
	early.wait()
	var defaults *schema.GroupVersionKind
	if gvk.Kind != "List" {
		itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
		defaults = &itemGVK
	}
	if !d.settle(l, defaults) {
		return bail()
	}
	if d.cache != nil {
		if d.cache.listItems == nil {
			d.cache.listItems = map[string]int{}
		}
		d.cache.listItems[rel] = l.items
	}
	return w.sum.Sum64(), w.size, nil
}

// streamMembers reads the members of the List object, from after its { to its }: the items
// (streamItems), apiVersion and kind (into h), and any other member, validated. false: the
// file is not for the streaming path.
func (d *manifestDecoder) streamMembers(w *window, l *listRead, early *earlyDecoder) (h head, ok bool) {
	w.ws()
	if c, ok := w.peek(); ok && c == '}' {
		return h, false // an empty object: not a List
	}
	for {
		w.ws()
		k, ok := w.value()
		if !ok || len(k) < 2 || k[0] != '"' {
			return h, false
		}
		s := jsonScanner{data: k}
		if end, escaped, ok := s.str(0); !ok || escaped || end != len(k) {
			return h, false
		}
		key := string(k[1 : len(k)-1])
		w.ws()
		if !w.expect(':') {
			return h, false
		}
		w.ws()
		if !d.streamMember(w, key, &h, l, early) {
			return h, false
		}
		w.ws()
		if w.expect(',') {
			continue
		}
		return h, w.expect('}')
	}
}

// streamMember reads the value of the List's member key: the items, apiVersion or kind (into
// h), or another member's value, validated. false: not for the streaming path.
func (d *manifestDecoder) streamMember(w *window, key string, h *head, l *listRead, early *earlyDecoder) bool {
	if key == "items" {
		if h.hasItems || !d.streamItems(w, l, early) {
			return false
		}
		h.hasItems = true
		return true
	}
	for _, n := range []string{"apiVersion", "kind", "items"} {
		if key != n && strings.EqualFold(key, n) {
			return false
		}
	}
	v, ok := w.value()
	if !ok {
		return false
	}
	s := jsonScanner{data: v}
	if key == "apiVersion" || key == "kind" {
		end, ok := s.headField(0, key, h, false)
		return ok && end == len(v)
	}
	end, ok := s.value(0)
	return ok && end == len(v)
}

// settle finishes the jobs of the List's items once its kind is known (defaults: the kind of
// the items of a typed List, nil for a List): the key prefix of the items to decode, the kind
// of those that name none, the result of those decoded early; an item nothing read is noted
// as still ignored. false: an item cannot be taken as streamed (the caller drops the jobs).
func (d *manifestDecoder) settle(l *listRead, defaults *schema.GroupVersionKind) bool {
	prefix := gvkString(defaults)
	for _, it := range l.ignored {
		if it.prefix != prefix {
			return false // ignored as an item of a List of another kind: read again
		}
	}
	for _, it := range l.late {
		gvk, ok := scannedGVK(head{apiVersion: it.apiVersion, kind: it.kind}, defaults)
		if !ok || isList(gvk.Kind, it.hasItems) {
			return false
		}
		d.jobs[it.job].p.gvk = gvk
	}
	for i := l.start; i < len(d.jobs); i++ {
		j := &d.jobs[i]
		if j.p == nil {
			if d.cache.prefixOf(j.res) != prefix {
				return false // found in the cache under another List kind: read again
			}
			continue
		}
		j.p.defaults = prefix
		if j.p.res != nil {
			j.res = j.p.res
		}
	}
	for _, it := range l.ignored {
		d.ignoring.note(it.key, prefix)
	}
	return true
}

// streamItems reads the items array at pos: each item is looked up in the cache, or copied,
// validated and, when it names its own kind, decoded while the rest is read.
func (d *manifestDecoder) streamItems(w *window, l *listRead, early *earlyDecoder) bool {
	if !w.expect('[') {
		return false
	}
	w.ws()
	if w.expect(']') {
		return true
	}
	for {
		if c, ok := w.peek(); !ok || c != '{' {
			return false
		}
		v, ok := w.value()
		if !ok || !d.streamItem(v, l, early) {
			return false
		}
		l.items++
		w.ws()
		if w.expect(',') {
			w.ws()
			continue
		}
		return w.expect(']')
	}
}

// streamItem adds the item v (valid until the window reads on) of the List being read: the
// cache's result, or a copy of its bytes to decode; an item nothing read in the file's last
// version is noted in l. false: not for the streaming path.
func (d *manifestDecoder) streamItem(v []byte, l *listRead, early *earlyDecoder) bool {
	var key docKey
	if d.cache != nil {
		key = dataKey(v)
		if e := d.cache.get(key); e != nil {
			d.jobs = append(d.jobs, job{at: l.where, res: e})
			return true
		}
		if prefix, ok := d.ignoring.was(key); ok {
			l.ignored = append(l.ignored, ignoredItem{key: key, prefix: prefix})
			return true
		}
	}
	p := &pending{data: append([]byte(nil), v...), keyed: d.cache != nil, key: key}
	h, ok := validItem(p.data, span{0, len(p.data)})
	if !ok {
		return false
	}
	if h.apiVersion == "" || h.kind == "" {
		l.late = append(l.late, lateItem{job: len(d.jobs), apiVersion: h.apiVersion, kind: h.kind, hasItems: h.hasItems})
	} else {
		// The item's own kind: the List's cannot change it.
		if p.gvk, ok = scannedGVK(h, nil); !ok || isList(p.gvk.Kind, h.hasItems) {
			return false
		}
		early.decode(p)
	}
	d.jobs = append(d.jobs, job{at: l.where, p: p})
	return true
}
