package watcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	sigyaml "sigs.k8s.io/yaml"
)

// manifestDecoder turns manifest files into Objects, the way `kubectl apply -f` reads them:
// YAML with several documents, JSON (one or more objects), List kinds. Decoding is strict, as
// kubectl's default server-side field validation is: an unknown or duplicate field is an
// error, not silently dropped.
//
// Reading the files only finds the objects (jobs); finish decodes them on all CPUs, reusing
// what an earlier read decoded from the same bytes, then keeps them in the order of the files,
// so that messages and their order do not depend on the parallelism or the cache.
type manifestDecoder struct {
	decoder          kruntime.Decoder
	defaultNamespace string
	logger           *slog.Logger
	// conv, when set, converts pods as they are decoded (Objects.ConvertedPods) instead of
	// keeping typed ones.
	conv *snapshot.PodConverter
	// cache, when set, holds what earlier reads decoded, by content; this read updates it.
	cache *docCache
	// ignoring is what the file being read had and still has that nothing reads (see
	// ignored.go). Only with cache.
	ignoring ignoring
	// watched are the watched resources (--watch) whose objects are kept too, converted with
	// objConv.
	watched []*watched
	objConv *snapshot.ObjectConverter
	// secretNamespace, when set, limits the Secrets kept: every one of that namespace, and
	// in the others the TLS Secrets of tlsNamespaces (see File.SecretNamespace).
	secretNamespace string
	tlsNamespaces   snapshot.Namespaces
	json            jsonOptions
	// early, while a YAML file is read, decodes its documents as they come (see earlyDecoder).
	early *earlyDecoder

	// prefer picks the definition kept of an object defined more than once (by its origins,
	// in the order of the files); nil: the first.
	prefer func(k objectKey, defs []*origin) int

	// dir is what the paths of files are relative to, for the positions of errors (Origins):
	// the directory as the operator named it.
	dir string

	// jobs, seen and window are scratch that dies with the read (a File lends them, see
	// readScratch).
	jobs   []job
	seen   seenSet
	window []byte
	objs   snapshot.Objects
	errs   []error
	// writes are the ConfigMaps and Secrets added, for their origins (see origins); memo, when
	// set, what the last read's were.
	writes []writtenAt
	memo   *originsMemo

	// What this read did, for the debug log and tests: YAML documents (and List items) read,
	// those converted to JSON, objects decoded.
	documents int
	converted int
	byKey     int // big ConfigMaps and Secrets read key by key (yamldata.go)
	dataKeys  int // their data keys converted alone
	decoded   atomic.Int64
	// lastDoc is the last document of the YAML file read last (yamlFileAt).
	lastDoc lastDocument
}

// origin is where an object is defined: the file and the line its document (or List) starts;
// for a ConfigMap or Secret, where it and the values of its data keys are (nil if unknown).
type origin struct {
	rel  string
	line int
	obj  *written
}

// job is one object of a file, or an error found while reading the file; jobs are kept in the
// order of the files. An object found in the cache needs no more than where it is and what it
// is (a hundred thousand of them are read again on every change, and kept by their file's
// entry): three pointers.
type job struct {
	at  *origin
	res *decoded // nil until decoded; still nil if the fast decode did not succeed
	// p is an object to decode, or an error; nil when found in the cache or kept by its file's
	// entry (res is then the cache's entry, with a cache).
	p *pending
}

// cached says that the job's result is the cache's entry (with a cache): found there, or kept
// by its file since it was put there.
func (j *job) cached() bool { return j.p == nil || j.p.found }

// skipped: decoded to nothing to add (a kind this program does not know).
func (j *job) skipped() bool { return j.p != nil && j.p.skip }

// pending is an object to decode, or an error, until its file's entry keeps what it gave: a
// first read of a List of 100,000 pods holds one each until its end (what only YAML documents
// have is behind a pointer).
type pending struct {
	data     []byte // the object as JSON; nil once decoded early (res)
	defaults string // the kind a typed List gives its items ("" for none): part of the key
	gvk      schema.GroupVersionKind
	err      error
	key      docKey
	res      *decoded // decoded while the file was still being read (see earlyDecoder)
	// doc is set when the cache knows the object by its YAML document (keyedDocument).
	doc   *yamlKeyed
	keyed bool
	known bool // ignored in its file's last version: not decoded again (ignored.go)
	// found: the object was found in the cache when its file was decoded (res is its entry).
	found bool
	skip  bool // decoded to nothing to add (a kind this program does not know)
}

// yamlKeyed is how the cache knows an object read from a YAML document: the document's key,
// and the data keys it was read from, one by one (yamldata.go).
type yamlKeyed struct {
	key  docKey
	keys []*dataEntry
}

// docKey identifies an object by its bytes: two independent 64-bit hashes (xxhash and
// maphash), so a mix-up needs both to collide. The kind its List gives it is checked apart
// (cacheEntry.prefix): a List's kind may come after its items.
type docKey [2]uint64

var docSeed = maphash.MakeSeed()

func dataKey(data []byte) docKey {
	return docKey{xxhash.Sum64(data), maphash.Bytes(docSeed, data)}
}

// docCache remembers decoded objects by content between reads, for as long as a read finds
// them: the objects of a directory with 100,000 pods are decoded once, then only those whose
// bytes change. The decoded objects are shared with the Objects returned: read-only. Its
// entries are the decoded records themselves (decoded.round, prefix, more): a hundred thousand
// pods take a record and a map slot each, nothing more.
type docCache struct {
	namespace string   // the default namespace the objects were decoded with
	ignored   *decoded // the result of every object nothing reads (see manifestDecoder.ignored)
	round     uint32
	entries   map[docKey]*decoded
	// prefixes are the kind prefixes entries were put with (decoded.prefix indexes them): a
	// few, "" and yamlDocument among them.
	prefixes []string
	// listItems is how many items each streamed List had (by file) in the last read: the next
	// read sizes its list once instead of growing it by a quarter at a time (5 times its
	// size in all).
	listItems map[string]int
	// dataEntries are the data keys of big ConfigMaps and Secrets, by their lines (yamldata.go).
	dataEntries map[docKey]*dataEntry
}

// entryMore is what few entries have besides their object.
type entryMore struct {
	// keys are the data keys the object was read from (yamldata.go): kept while it is.
	keys []*dataEntry
	// written is where a ConfigMap's or Secret's data keys are in its document, as if it
	// started the file: known once a read found the document again (knownDocument).
	written *written
}

// use marks e (and the data keys it was read from) found by the read of round.
func (e *decoded) use(round uint32) {
	e.round = round
	if e.more != nil {
		for _, k := range e.more.keys {
			k.round = round
		}
	}
}

func (c *docCache) get(k docKey) *decoded {
	if c == nil {
		return nil
	}
	return c.entries[k]
}

// find is get for an object its List gives the kind prefix.
func (c *docCache) find(k docKey, prefix string) *decoded {
	if e := c.get(k); e != nil && c.prefixes[e.prefix] == prefix {
		return e
	}
	return nil
}

// prefixOf is the kind prefix of e, as get found it.
func (c *docCache) prefixOf(e *decoded) string { return c.prefixes[e.prefix] }

// put makes r the entry of key k, with its kind prefix, found by the read of round.
func (c *docCache) put(k docKey, r *decoded, prefix string, round uint32) {
	i := slices.Index(c.prefixes, prefix)
	if i < 0 {
		i = len(c.prefixes)
		c.prefixes = append(c.prefixes, prefix)
	}
	r.prefix, r.round = uint32(i), round
	c.entries[k] = r
}

// decoded is a decoded object, ready to be added: read-only once made, since a later read
// may reuse it; with a cache, also its entry there (round, prefix, more: what only the
// decoding of a read changes). It holds one form of the object, whose kind and metadata are
// read from it: a hundred thousand pods take a 32-byte record each.
type decoded struct {
	// v is what is kept of the object: a *snapshot.Pod (a converted pod); a typed ConfigMap,
	// Secret, Pod or EndpointSlice; a *watchedForm (an object of watched resources, which
	// holds its other forms); nil for an object nothing reads.
	v      any
	round  uint32     // the last read that found it in the cache
	prefix uint32     // the kind a typed List gave it (pending.defaults): docCache.prefixes[prefix]
	more   *entryMore // nil for most
}

// watchedForm is an object converted for the watched resources in by (whose namespace and
// selector add checks), of kind; and its forms the snapshot reads too (obj, pod: see decoded.v).
type watchedForm struct {
	object *snapshot.Object
	by     []*watched
	kind   string
	obj    kruntime.Object
	pod    *snapshot.Pod
}

// parts are the forms of the object: typed (a ConfigMap, Secret, Pod or EndpointSlice), a
// converted pod, watched; nil for those it has not.
func (r *decoded) parts() (obj kruntime.Object, pod *snapshot.Pod, w *watchedForm) {
	switch v := r.v.(type) {
	case *snapshot.Pod:
		pod = v
	case *watchedForm:
		obj, pod, w = v.obj, v.pod, v
	case kruntime.Object:
		obj = v
	}
	return obj, pod, w
}

// kind is ConfigMap, Secret, Pod, EndpointSlice or a watched kind; "" for another kind (an
// object nothing reads, a Secret dropped).
func (r *decoded) kind() string {
	obj, pod, w := r.parts()
	switch {
	case w != nil:
		return w.kind
	case pod != nil:
		return "Pod"
	}
	switch obj.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Secret:
		return "Secret"
	case *corev1.Pod:
		return "Pod"
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice"
	}
	return ""
}

// typedMeta is the metadata of a ConfigMap, Secret, typed Pod or EndpointSlice; nil for another
// object.
func typedMeta(obj kruntime.Object) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return &o.ObjectMeta
	case *corev1.Secret:
		return &o.ObjectMeta
	case *corev1.Pod:
		return &o.ObjectMeta
	case *discoveryv1.EndpointSlice:
		return &o.ObjectMeta
	}
	return nil
}

func newManifestDecoder(defaultNamespace string, logger *slog.Logger) *manifestDecoder {
	if defaultNamespace == "" {
		defaultNamespace = corev1.NamespaceDefault
	}
	return &manifestDecoder{
		decoder:          serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer(),
		defaultNamespace: defaultNamespace,
		logger:           logger,
		json:             defaultJSON(),
	}
}

func inputError(rel string, line, col int, err error) error {
	return &snapshot.InputError{
		Stage: snapshot.StageDecode,
		Ref:   snapshot.Ref{Kind: "File", Name: rel},
		Line:  line,
		Col:   col,
		Err:   err,
	}
}

// fail reports an error found while reading a file, in its turn among the file's objects.
func (d *manifestDecoder) fail(rel string, line, col int, err error) {
	d.jobs = append(d.jobs, job{at: &origin{rel: rel, line: line}, p: &pending{err: inputError(rel, line, col, err)}})
}

// file decodes one file; rel is its path relative to the directory, for errors and logs.
func (d *manifestDecoder) file(rel string, data []byte) {
	if strings.HasSuffix(rel, ".json") {
		d.jsonFile(rel, data)
		return
	}
	d.yamlFile(rel, data)
}

// yamlLine finds the line in the messages of the YAML parser ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`line (\d+): `)

func (d *manifestDecoder) yamlFile(rel string, data []byte) { d.yamlFileAt(rel, data, 0, 1) }

// lastDocument is where the last document of the YAML file read last starts (offset and line
// in the file; offset -1 when unknown: the file had CRLFs) and the index of its first job:
// what a read of the file with lines appended parses again (File.appended).
type lastDocument struct{ offset, line, job int }

// yamlFileAt reads data, the part of a YAML file from offset base on, which starts at line0
// and at a document's start.
func (d *manifestDecoder) yamlFileAt(rel string, data []byte, base, line0 int) {
	d.lastDoc = lastDocument{offset: base, line: line0, job: len(d.jobs)}
	if bytes.Contains(data, []byte("\r\n")) {
		data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")) // a copy: only when needed
		d.lastDoc.offset = -1
	}
	d.early = d.newEarlyDecoder()
	defer func() {
		d.early.wait()
		d.early = nil
	}()
	lines := lineCounter{data: data}
	for next := 0; ; {
		doc, start, after, err := nextDocument(data, next)
		if err == io.EOF {
			return
		}
		if err != nil {
			// Only a bad "---" line makes the reader fail.
			d.fail(rel, line0-1+badSeparatorLine(data, next), 0, fmt.Errorf("invalid YAML: %v", err))
			return
		}
		next = after
		line := line0 - 1 + lines.at(start)
		if d.lastDoc.offset >= 0 {
			d.lastDoc = lastDocument{offset: base + start, line: line, job: len(d.jobs)}
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		d.documents++
		var ykey docKey
		if d.cache != nil {
			// A document ignored or kept in the file's last version is not converted again:
			// the conversion is most of the cost of a big YAML file.
			if ykey = dataKey(doc); d.stillIgnored(ykey, yamlDocument) || d.knownDocument(rel, line, line, doc, ykey, "", false) {
				continue
			}
			// A big List (kubectl get -o yaml) item by item: converted whole, it would
			// take many times its size, and every item again after any change.
			if int64(len(doc)) >= d.json.streamMin && d.yamlList(rel, line, doc) {
				continue
			}
			if len(doc) >= dataSplitMin && d.yamlData(rel, line, doc, ykey) {
				continue
			}
		}
		d.converted++
		j, err := sigyaml.YAMLToJSONStrict(doc)
		if err != nil {
			msg := err.Error()
			msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
			msg = strings.TrimPrefix(msg, "yaml: ")
			errLine := 0
			if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
				n, _ := strconv.Atoi(msg[m[2]:m[3]])
				errLine = line + n - 1
				if m[0] == 0 {
					msg = msg[m[1]:]
				}
			}
			if errLine == 0 {
				errLine = line
			}
			d.fail(rel, errLine, 0, fmt.Errorf("invalid YAML: %s", msg))
			continue
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue // only comments
		}
		var w docWritten
		if mayHoldDataKeys(j) {
			w.root, w.items = writtenIn(doc, line, 1, "")
		}
		d.keyedDocument(rel, line, j, nil, w, ykey, nil)
	}
}

// nextDocument finds the YAML document from offset from of data, as the YAML reader of
// kubectl's apimachinery does: the lines up to the next "---" line (which may carry a comment,
// nothing else), skipping empty ones. It returns the document as a slice of data (no copy: a
// 100 MB file is not copied line by line), where it starts, and where the next one is looked
// for; io.EOF at the end, an error for a "---" line followed by something else.
func nextDocument(data []byte, from int) (doc []byte, start, next int, err error) {
	start = from
	for pos := from; pos < len(data); {
		end := lineEnd(data, pos)
		if bytes.HasPrefix(data[pos:end], []byte("---")) {
			if rest := bytes.TrimSpace(data[pos+3 : end]); len(rest) > 0 && rest[0] != '#' {
				return nil, 0, 0, fmt.Errorf("invalid Yaml document separator: %s", rest)
			}
			if pos > start {
				return data[start:pos], start, end + 1, nil
			}
			start = end + 1
		}
		pos = end + 1
	}
	if start >= len(data) {
		return nil, 0, 0, io.EOF
	}
	return data[start:], start, len(data), nil
}

// docWritten is where the ConfigMaps and Secrets of a document are written (see writtenIn).
type docWritten struct {
	root  *written
	items []*written
}

// jsonOptions choose how JSON files are read. The sidecar always uses defaultJSON; tests turn
// the fast path off, or stream (jsonstream.go) every file through a tiny window, to compare
// the paths.
type jsonOptions struct {
	fast      bool  // try the in-memory fast path (scanJSONFile) before encoding/json
	streamMin int64 // the size from which a file is streamed
	streamBuf int   // the window's first size (it grows to hold the largest item)
}

// defaultJSON streams through a window of a quarter of a megabyte, a few hundred items of a
// List of pods, kept between reads (readScratch): reads that size cost no more than of a
// megabyte.
func defaultJSON() jsonOptions {
	return jsonOptions{fast: true, streamMin: 4 << 20, streamBuf: 256 << 10}
}

func (d *manifestDecoder) jsonFile(rel string, data []byte) {
	if d.json.fast {
		if docs, ok := scanJSONFile(data); ok && d.scannedJobs(rel, data, docs) {
			return
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	lines := lineCounter{data: data}
	for {
		start := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		if err != nil {
			var syn *json.SyntaxError
			if errors.As(err, &syn) {
				line, col := position(data, syn.Offset)
				d.fail(rel, line, col, fmt.Errorf("invalid JSON: %v", syn))
			} else if errors.Is(err, io.ErrUnexpectedEOF) {
				line, col := position(data, int64(len(data)))
				d.fail(rel, line, col, errors.New("invalid JSON: unexpected end of input"))
			} else {
				d.fail(rel, lineAt(data, int(start)), 0, fmt.Errorf("invalid JSON: %v", err))
			}
			return
		}
		offset := int(start)
		for offset < len(data) && isSpace(data[offset]) {
			offset++
		}
		line := lines.at(offset)
		var w docWritten
		if mayHoldDataKeys(raw) {
			w.root, w.items = writtenIn(raw, line, offset-bytes.LastIndexByte(data[:offset], '\n'), "")
		}
		d.document(rel, line, raw, nil, w)
	}
}

// document decodes one object (JSON); line is where it starts in the file, w where its
// ConfigMaps and Secrets are written. defaults gives the kind of the items of a typed list (a
// ConfigMapList's items carry no kind).
func (d *manifestDecoder) document(rel string, line int, j []byte, defaults *schema.GroupVersionKind, w docWritten) {
	trimmed := bytes.TrimSpace(j)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		d.fail(rel, line, 0, fmt.Errorf("the document is not an object: want a Kubernetes object with apiVersion and kind"))
		return
	}
	var head struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Items      json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(j, &head); err != nil {
		d.fail(rel, line, 0, fmt.Errorf("reading apiVersion and kind: %v", err))
		return
	}
	if defaults != nil {
		if head.APIVersion == "" {
			head.APIVersion = defaults.GroupVersion().String()
		}
		if head.Kind == "" {
			head.Kind = defaults.Kind
		}
	}
	switch {
	case head.Kind == "":
		d.fail(rel, line, 0, errors.New("the object has no kind"))
		return
	case head.APIVersion == "":
		d.fail(rel, line, 0, fmt.Errorf("the %s has no apiVersion", head.Kind))
		return
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		d.fail(rel, line, 0, fmt.Errorf("the %s has an invalid apiVersion: %v", head.Kind, err))
		return
	}
	gvk := gv.WithKind(head.Kind)

	if head.Kind == "List" || (strings.HasSuffix(head.Kind, "List") && head.Items != nil) {
		d.list(rel, line, gvk, head.Items, w.items)
		return
	}

	d.add1(&origin{rel: rel, line: line, obj: w.root}, &pending{data: j, defaults: gvkString(defaults), gvk: gvk})
}

// keyedDocument is document for a YAML document (or List item) that the cache will know by
// key, its bytes, when it is one object to decode: the next read skips its conversion
// (knownDocument). keys are the data keys it was read from, one by one (yamldata.go).
func (d *manifestDecoder) keyedDocument(rel string, line int, j []byte, defaults *schema.GroupVersionKind, w docWritten, key docKey, keys []*dataEntry) {
	n := len(d.jobs)
	d.document(rel, line, j, defaults, w)
	if d.cache != nil && len(d.jobs) == n+1 && d.jobs[n].p != nil {
		p := d.jobs[n].p
		p.doc = &yamlKeyed{key: key, keys: keys}
	}
}

// add1 adds the job of one object: found in the cache, known to be ignored, or to decode
// (at once while a YAML file is read: its bytes are then dropped).
func (d *manifestDecoder) add1(at *origin, p *pending) {
	if d.cache != nil {
		p.key, p.keyed = dataKey(p.data), true
		if e := d.cache.find(p.key, p.defaults); e != nil {
			d.jobs = append(d.jobs, job{at: at, res: e})
			return
		}
		if d.stillIgnored(p.key, p.defaults) {
			return
		}
	}
	d.jobs = append(d.jobs, job{at: at, p: p})
	if d.early != nil && p.defaults == "" {
		d.early.decode(p)
	}
}

func (d *manifestDecoder) list(rel string, line int, gvk schema.GroupVersionKind, items json.RawMessage, written []*written) {
	var raw []json.RawMessage
	if len(items) > 0 && !bytes.Equal(items, []byte("null")) {
		if err := json.Unmarshal(items, &raw); err != nil {
			d.fail(rel, line, 0, fmt.Errorf("the %s's items are not a list of objects: %v", gvk.Kind, err))
			return
		}
	}
	var defaults *schema.GroupVersionKind
	if gvk.Kind != "List" {
		// Items of a ConfigMapList are ConfigMaps of the list's version.
		itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
		defaults = &itemGVK
	}
	for i, item := range raw {
		var w docWritten
		if i < len(written) {
			w.root = written[i]
		}
		d.document(rel, line, item, defaults, w)
	}
}

// scannedJobs makes the jobs of a JSON file the fast scanner read, as document and list would
// have; false (and no jobs) when the slow path must read the file. An item of a List is
// looked up in the cache first: found, its bytes are known to be valid; otherwise it is
// validated here.
func (d *manifestDecoder) scannedJobs(rel string, data []byte, docs []head) bool {
	start := len(d.jobs)
	bail := func() bool {
		d.jobs = d.jobs[:start]
		return false
	}
	line, at := 1, 0
	for _, doc := range docs {
		line += bytes.Count(data[at:doc.start], []byte{'\n'})
		at = doc.start
		where := &origin{rel: rel, line: line}
		gvk, ok := scannedGVK(doc, nil)
		if !ok {
			return bail()
		}
		if !isList(gvk.Kind, doc.hasItems) {
			if doc.hasItems {
				return bail() // items are not validated, and decoding will complain anyway
			}
			if hasDataKeys(gvk.Kind) {
				where.obj, _ = writtenIn(data[doc.start:doc.end], line, doc.start-bytes.LastIndexByte(data[:doc.start], '\n'), "")
			}
			d.jobs = append(d.jobs, job{at: where, p: &pending{data: data[doc.start:doc.end], gvk: gvk}})
			continue
		}
		var defaults *schema.GroupVersionKind
		if gvk.Kind != "List" {
			itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
			defaults = &itemGVK
		}
		prefix := gvkString(defaults)
		d.jobs = slices.Grow(d.jobs, len(doc.items))
		lines := lineCounter{data: data}
		for _, sp := range doc.items {
			item := data[sp.start:sp.end]
			// A ConfigMap or Secret: where it and its keys are written.
			at := func(kind string) *origin {
				if !hasDataKeys(kind) {
					return where
				}
				w, _ := writtenIn(item, lines.at(sp.start), sp.start-bytes.LastIndexByte(data[:sp.start], '\n'), kind)
				return &origin{rel: rel, line: line, obj: w}
			}
			var key docKey
			if d.cache != nil {
				key = dataKey(item)
				if e := d.cache.find(key, prefix); e != nil {
					d.jobs = append(d.jobs, job{at: at(e.kind()), res: e})
					continue
				}
				if d.stillIgnored(key, prefix) {
					continue
				}
			}
			h, ok := validItem(data, sp)
			if !ok {
				return bail()
			}
			igvk, ok := scannedGVK(h, defaults)
			if !ok || isList(igvk.Kind, h.hasItems) {
				return bail()
			}
			d.jobs = append(d.jobs, job{at: at(igvk.Kind), p: &pending{data: item, defaults: prefix, gvk: igvk, keyed: d.cache != nil, key: key}})
		}
	}
	return true
}

// gvkString is the key prefix of the items of a List whose kind gives them defaults.
func gvkString(gvk *schema.GroupVersionKind) string {
	if gvk == nil {
		return ""
	}
	return gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}

// scannedGVK is what document makes of a head; false where document reports an error.
func scannedGVK(h head, defaults *schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	if defaults != nil {
		if h.apiVersion == "" {
			h.apiVersion = defaults.GroupVersion().String()
		}
		if h.kind == "" {
			h.kind = defaults.Kind
		}
	}
	if h.kind == "" || h.apiVersion == "" {
		return schema.GroupVersionKind{}, false
	}
	gv, err := schema.ParseGroupVersion(h.apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(h.kind), true
}

// hasDataKeys: objects of kind have data keys whose positions errors give (see written).
func hasDataKeys(kind string) bool { return kind == "ConfigMap" || kind == "Secret" }

func isList(kind string, hasItems bool) bool {
	return kind == "List" || (strings.HasSuffix(kind, "List") && hasItems)
}

// finish decodes the jobs (on all CPUs, reusing the cache), then adds the objects and
// reports the errors in the order of the files.
func (d *manifestDecoder) finish() {
	d.decodeJobs()
	d.addJobs()
	d.origins(nil)
}

// decodeParallel decodes, on all CPUs, the jobs that are neither bad, decoded early nor found
// in the cache; decodeJobs then records what they gave.
func (d *manifestDecoder) decodeParallel() {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	work := func() {
		for i := int(next.Add(1) - 1); i < len(d.jobs); i = int(next.Add(1) - 1) {
			j := &d.jobs[i]
			if j.res == nil && j.p != nil && j.p.res != nil {
				j.res = j.p.res // decoded early
			}
			if j.p == nil || j.p.err != nil || j.res != nil || j.p.skip {
				continue // found in the cache, bad, decoded early (see earlyDecoder) or before
			}
			if d.cache != nil && !j.p.keyed {
				j.p.key, j.p.keyed = dataKey(j.p.data), true
				if e := d.cache.find(j.p.key, j.p.defaults); e != nil {
					j.res, j.p.found = e, true
					continue
				}
				if p, ok := d.ignoring.was(j.p.key); ok && p == j.p.defaults {
					j.res, j.p.known, j.p.data = d.ignored(), true, nil // its file keeps its key
					continue
				}
			}
			j.res = d.fastDecode(j.p)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (len(d.jobs)+31)/32)
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// decodeJobs decodes the jobs (on all CPUs, reusing the cache): each ends with its result
// (res), its error (p.err) or skip. It puts what it decoded in the cache and drops from the
// cache what this read did not find.
func (d *manifestDecoder) decodeJobs() {
	d.decodeParallel()
	var round uint32
	if d.cache != nil {
		d.cache.round++
		round = d.cache.round
		if d.cache.entries == nil {
			d.cache.entries = map[docKey]*decoded{}
		}
	}
	for i := range d.jobs {
		j := &d.jobs[i]
		fresh := j.p != nil && j.p.err == nil && !j.p.skip && !j.p.found // decoded by this read
		switch {
		case j.p != nil && (j.p.err != nil || j.p.skip):
		case j.res == nil:
			res, err := d.decode(j.at, j.p)
			switch {
			case err != nil:
				j.p.err = err
			case res == nil:
				j.p.skip = true
			default:
				j.res = res
			}
		case d.cache == nil:
		case j.cached():
			j.res.use(round)
			if j.p != nil && j.p.doc != nil && d.cache.prefixOf(j.res) != yamlDocument {
				// Found by its JSON (another file has the same object): by its YAML too, a
				// record of its own (an entry has one prefix).
				byYAML := &decoded{v: j.res.v}
				d.cache.put(j.p.doc.key, byYAML, yamlDocument, round)
			}
		case j.res.kind() == "":
			// Ignored: not cached (the file remembers its key, fileEntry.ignored), nor logged
			// again when known.
			fresh = fresh && !j.p.known
		default:
			key, prefix := j.p.key, j.p.defaults
			if j.p.doc != nil {
				// Known by its YAML: the next read skips its conversion (knownDocument).
				key, prefix = j.p.doc.key, yamlDocument
				if j.p.doc.keys != nil {
					j.res.more = &entryMore{keys: j.p.doc.keys}
				}
			}
			d.cache.put(key, j.res, prefix, round)
		}
		if fresh && j.res != nil && j.res.kind() == "" && j.p.gvk.Kind != "Secret" {
			d.logger.Debug("ignoring an object that is not a ConfigMap, Secret, Pod or EndpointSlice",
				"file", j.at.rel, "line", j.at.line, "kind", j.p.gvk.Kind, "apiVersion", j.p.gvk.GroupVersion().String())
		}
	}
	if d.cache != nil {
		for k, e := range d.cache.entries {
			if e.round != round {
				delete(d.cache.entries, k)
			}
		}
		for k, e := range d.cache.dataEntries {
			if e.round != round {
				delete(d.cache.dataEntries, k)
			}
		}
	}
}

// addJobs adds the objects of the decoded jobs and reports their errors, in their order. Of an
// object defined more than once, one definition is kept (see duplicates) and each other one is
// an error where it is.
func (d *manifestDecoder) addJobs() {
	dups := d.duplicates()
	for i := range d.jobs {
		switch j := &d.jobs[i]; {
		case j.p != nil && j.p.err != nil:
			d.errs = append(d.errs, j.p.err)
		case j.skipped() || j.res == nil:
		case dups[i] != nil:
			d.errs = append(d.errs, duplicateError(j.at, j.res.key(), dups[i]))
		default:
			d.add(j.at, j.res)
		}
	}
	// The jobs are done with: their pending decodes (and the bytes they hold) are dropped, the
	// slice kept for the next read (readScratch).
	clear(d.jobs)
	d.jobs = d.jobs[:0]
}

// fastDecode is what the decoder does with an object of a known kind whose apiVersion and
// kind are read already: make the object, then decode strictly (unknown or duplicate fields
// are errors). nil when that is not enough; decode then gives the decoder's own result.
func (d *manifestDecoder) fastDecode(p *pending) *decoded {
	d.decoded.Add(1)
	obj, err := scheme.Scheme.New(p.gvk)
	if err != nil {
		return nil
	}
	strict, err := kjson.UnmarshalStrict(p.data, obj)
	if err != nil || len(strict) > 0 {
		return nil
	}
	res, err := d.prepare(obj, p.gvk)
	if err != nil {
		return nil // decode reports it
	}
	return res
}

// decode decodes with the decoder and returns what it rejects; nil and no error when nothing
// is to be added.
func (d *manifestDecoder) decode(at *origin, p *pending) (*decoded, error) {
	obj, _, err := d.decoder.Decode(p.data, &p.gvk, nil)
	switch {
	case kruntime.IsNotRegisteredError(err):
		if by := d.watchedBy(p.gvk); by != nil {
			return d.custom(at, p, by)
		}
		d.logger.Warn("ignoring an object of a kind this program does not know",
			"file", at.rel, "line", at.line, "apiVersion", p.gvk.GroupVersion().String(), "kind", p.gvk.Kind)
		return nil, nil
	case err != nil:
		// Decoder messages name fields and types, never values (a Secret's data stays out).
		return nil, inputError(at.rel, at.line, 0, fmt.Errorf("decoding the %s: %v", p.gvk.Kind, err))
	}
	res, err := d.prepare(obj, p.gvk)
	if err != nil {
		return nil, inputError(at.rel, at.line, 0, err)
	}
	return res, nil
}

// watchedBy are the watched resources whose objects are of kind gvk.
func (d *manifestDecoder) watchedBy(gvk schema.GroupVersionKind) []*watched {
	var out []*watched
	for _, w := range d.watched {
		if w.matches(gvk) {
			out = append(out, w)
		}
	}
	return out
}

// custom decodes an object of a kind client-go does not know (a custom resource) that a
// watched resource takes: as JSON, kept as it is written (no namespace is given to it: the file
// source cannot tell a namespaced custom resource from a cluster-scoped one).
func (d *manifestDecoder) custom(at *origin, p *pending, by []*watched) (*decoded, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(p.data); err != nil {
		return nil, inputError(at.rel, at.line, 0, fmt.Errorf("decoding the %s: %v", p.gvk.Kind, err))
	}
	statusSeen(by).Trim(u.Object)
	o, err := d.objConv.FromUnstructured(u.Object)
	if err != nil {
		return nil, inputError(at.rel, at.line, 0, fmt.Errorf("the %s: %v", p.gvk.Kind, err))
	}
	return &decoded{v: &watchedForm{object: o, by: by, kind: p.gvk.Kind}}, nil
}

// statusSeen is what of the object's status the watched resources that take it see together
// (;status=): what any of them sees.
func statusSeen(by []*watched) watchspec.Status {
	if len(by) == 0 {
		return watchspec.Status{}
	}
	st := by[0].spec.Status
	for _, w := range by[1:] {
		st = st.Union(w.spec.Status)
	}
	return st
}

// prepare does to a decoded object what the API server would have: the default namespace, a
// Secret's stringData folded into data; and converts a pod when the decoder converts pods, and
// an object of a watched resource (gvk is its kind).
func (d *manifestDecoder) prepare(obj kruntime.Object, gvk schema.GroupVersionKind) (*decoded, error) {
	defaultNS := func(m *metav1.ObjectMeta) {
		if m.Namespace == "" {
			m.Namespace = d.defaultNamespace
		}
	}
	var typed kruntime.Object // the typed form the snapshot reads
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		defaultNS(&o.ObjectMeta)
		typed = o
	case *corev1.Secret:
		defaultNS(&o.ObjectMeta)
		foldStringData(o)
		if !d.keepSecret(o) {
			if d.watchedBy(gvk) == nil {
				return d.ignored(), nil // dropped: nothing of it is held
			}
			break // only the watched form
		}
		typed = o
	case *corev1.Pod:
		defaultNS(&o.ObjectMeta)
		if d.conv != nil && d.watchedBy(gvk) == nil {
			return &decoded{v: d.conv.Convert(o)}, nil
		}
		typed = o
	case *discoveryv1.EndpointSlice:
		defaultNS(&o.ObjectMeta)
		typed = o
	default:
		if d.watchedBy(gvk) == nil {
			return d.ignored(), nil // decoded (strictly: it must be valid), then nothing of it is kept
		}
	}
	by := d.watchedBy(gvk)
	if by == nil {
		return &decoded{v: typed}, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("the %s has no metadata: %v", gvk.Kind, err)
	}
	if m.GetNamespace() == "" && !by[0].clusterScoped {
		m.SetNamespace(d.defaultNamespace)
	}
	if m.GetName() == "" {
		return nil, fmt.Errorf("the %s has no metadata.name", gvk.Kind)
	}
	o, err := d.objConv.FromTyped(obj, gvk)
	if err != nil {
		return nil, fmt.Errorf("the %s: %v", gvk.Kind, err)
	}
	if st := statusSeen(by); !st.All() {
		o = o.WithStatus(st.Keeps)
	}
	w := &watchedForm{object: o, by: by, kind: gvk.Kind, obj: typed}
	if p, ok := obj.(*corev1.Pod); ok && d.conv != nil {
		// A pod both selected by services and watched: the services' form too.
		w.obj, w.pod = nil, d.conv.Convert(p)
	}
	return &decoded{v: w}, nil
}

// keepSecret says whether a Secret is one the snapshot may read (see File.SecretNamespace).
func (d *manifestDecoder) keepSecret(s *corev1.Secret) bool {
	return d.secretNamespace == "" || s.Namespace == d.secretNamespace ||
		(s.Type == corev1.SecretTypeTLS && d.tlsNamespaces.Has(s.Namespace))
}

// add keeps ConfigMaps, Secrets, Pods and EndpointSlices, as the API server would store them,
// and the objects of the watched resources.
func (d *manifestDecoder) add(at *origin, r *decoded) {
	k := r.key()
	if k.kind == "" {
		return // ignored (logged when decoded) or a Secret dropped (keepSecret)
	}
	if k.name == "" {
		d.errs = append(d.errs, inputError(at.rel, at.line, 0, fmt.Errorf("the %s has no metadata.name", k.kind)))
		return
	}
	obj, pod, form := r.parts()
	if form != nil {
		for _, w := range form.by {
			if w.keep(form.object) {
				if d.objs.Resources == nil {
					d.objs.Resources = map[string][]*snapshot.Object{}
				}
				d.objs.Resources[w.spec.Name()] = append(d.objs.Resources[w.spec.Name()], form.object)
			}
		}
	}
	if pod != nil {
		if d.objs.ConvertedPods == nil {
			d.objs.ConvertedPods = make([]*snapshot.Pod, 0, len(d.jobs))
		}
		d.objs.ConvertedPods = append(d.objs.ConvertedPods, pod)
		return
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		d.objs.ConfigMaps = append(d.objs.ConfigMaps, o)
		d.writes = append(d.writes, writtenAt{at, r})
	case *corev1.Secret:
		d.objs.Secrets = append(d.objs.Secrets, o)
		d.writes = append(d.writes, writtenAt{at, r})
	case *corev1.Pod:
		d.objs.Pods = append(d.objs.Pods, o)
	case *discoveryv1.EndpointSlice:
		d.objs.EndpointSlices = append(d.objs.EndpointSlices, o)
	}
}

// writtenAt is a ConfigMap or Secret added (obj) and where it is.
type writtenAt struct {
	at  *origin
	obj *decoded
}

// originsMemo is what the Origins of a read were made of (the directory, the objects added and
// where, the files) and the Origins: a read that makes them of the same (most reads: an edit of
// a pod) gives the same map, read-only, instead of a new one (the services ConfigMap's 10,000
// keys: 2.4 MB, held twice while the last read's objects are).
type originsMemo struct {
	dir     string
	writes  []writtenAt
	files   []string
	origins snapshot.Origins
}

// origins makes Objects.Origins: where the ConfigMaps and Secrets added, and the values of
// their data keys, are written, and where the files are (by path relative to the directory);
// the last read's (memo) when they are made of the same. The map is made at its size once.
func (d *manifestDecoder) origins(files []string) {
	if m := d.memo; m != nil && m.origins != nil && m.dir == d.dir && slices.Equal(m.writes, d.writes) && slices.Equal(m.files, files) {
		d.objs.Origins = m.origins
		return
	}
	n := len(files)
	for _, w := range d.writes {
		n++
		if w.at.obj != nil {
			n += len(w.at.obj.keys)
		}
	}
	if n > 0 {
		d.objs.Origins = make(snapshot.Origins, n)
	}
	for _, w := range d.writes {
		d.written(w.at, w.obj.key())
	}
	for _, rel := range files {
		d.fileOrigin(rel)
	}
	if d.memo != nil {
		*d.memo = originsMemo{dir: d.dir, writes: d.writes, files: files, origins: d.objs.Origins}
	}
}

// written records where the ConfigMap or Secret k and the values of its data keys are
// written.
func (d *manifestDecoder) written(at *origin, k objectKey) {
	file := d.path(at.rel)
	ref := snapshot.Ref{Kind: k.kind, Namespace: k.namespace, Name: k.name}
	line := at.line
	if at.obj != nil && at.obj.line > 0 {
		line = at.obj.line
	}
	d.objs.Origins[ref] = snapshot.Origin{Position: snapshot.Position{File: file, Line: line}}
	if at.obj == nil {
		return
	}
	for i := range at.obj.keys {
		og := at.obj.origin(i)
		ref.Key, og.File = at.obj.keys[i].key, file
		d.objs.Origins[ref] = og
	}
}

// path is the path of a file as the operator names it: relative to the directory given.
func (d *manifestDecoder) path(rel string) string {
	if d.dir == "" {
		return rel
	}
	return filepath.Join(d.dir, rel)
}

// fileOrigin records where file rel is, for errors about the file itself (Ref Kind "File",
// whose lines are the file's).
func (d *manifestDecoder) fileOrigin(rel string) {
	if d.objs.Origins == nil {
		d.objs.Origins = snapshot.Origins{}
	}
	d.objs.Origins[snapshot.Ref{Kind: "File", Name: rel}] = snapshot.Origin{
		Position: snapshot.Position{File: d.path(rel), Line: 1, Col: 1}, Style: snapshot.Literal}
}

// objectKey names an object: two definitions with the same key are one object defined twice.
type objectKey struct{ kind, namespace, name string }

// key names the object; its kind is "" for an object nothing reads.
func (r *decoded) key() objectKey {
	kind := r.kind()
	obj, pod, w := r.parts()
	switch m := typedMeta(obj); {
	case pod != nil:
		return objectKey{kind, pod.Namespace(), pod.Name()}
	case m != nil:
		return objectKey{kind, m.Namespace, m.Name}
	case w != nil:
		return objectKey{kind, w.object.Namespace(), w.object.Name()}
	}
	return objectKey{}
}

// foldStringData does what the API server does with a Secret's stringData: merge it into data
// (stringData wins) and drop it; and an empty type becomes Opaque.
func foldStringData(s *corev1.Secret) {
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

// badSeparatorLine finds the first line from offset that the YAML reader rejects: "---"
// followed by something other than a comment.
func badSeparatorLine(data []byte, offset int) int {
	line := lineAt(data, offset)
	for _, l := range strings.SplitAfter(string(data[offset:]), "\n") {
		if rest, ok := strings.CutPrefix(l, "---"); ok {
			if rest = strings.TrimSpace(rest); rest != "" && !strings.HasPrefix(rest, "#") {
				return line
			}
		}
		line++
	}
	return 0
}

// lineAt is the 1-based line of the byte at offset.
// lineCounter gives the lines of increasing offsets in data, counting each byte once (a
// file of many documents would otherwise be counted again from its start for each).
type lineCounter struct {
	data   []byte
	offset int // counted up to here
	line   int // lines before offset, less one
}

func (c *lineCounter) at(offset int) int {
	offset = max(0, min(offset, len(c.data)))
	if offset < c.offset {
		return lineAt(c.data, offset)
	}
	c.line += bytes.Count(c.data[c.offset:offset], []byte{'\n'})
	c.offset = offset
	return 1 + c.line
}

func lineAt(data []byte, offset int) int {
	offset = max(0, min(offset, len(data)))
	return 1 + bytes.Count(data[:offset], []byte{'\n'})
}

// position converts the offset of a JSON error (bytes read when it was found) into the line
// and column of the offending byte.
func position(data []byte, offset int64) (line, col int) {
	p := max(0, min(int(offset)-1, len(data)))
	before := data[:p]
	return 1 + bytes.Count(before, []byte{'\n'}), p - bytes.LastIndexByte(before, '\n')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
