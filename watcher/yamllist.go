package watcher

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strings"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigyaml "sigs.k8s.io/yaml"
)

// Big YAML files, known by their documents. A YAML document (or an item of a YAML List) that
// a read decoded is known by its own bytes to the next read, which takes its object from the
// cache without converting it to JSON again: converting is most of what reading a big YAML
// file costs (a 100 MB file of pods took as long to read again after one line was appended as
// at first). A big List document, as `kubectl get -o yaml` prints one, is read item by item:
// converted whole, it takes many times its size in memory (gigabytes for 100 MB), and every
// item is converted again whatever changed.

// knownDocument adds the job of the YAML document text (key: its bytes'), which starts at
// line of rel, when the cache has its object from an earlier read; false when it has not. docLine
// is the line of the document it is in (the object's origin: a List's items are named by the
// List's line, as when the List is read whole); kind is the kind its List gives it ("" for
// none); item says that text is an item of a List, "-" and all.
func (d *manifestDecoder) knownDocument(rel string, docLine, line int, text []byte, key docKey, kind string, item bool) bool {
	e := d.cache.find(key, yamlDocument)
	if e == nil {
		return false
	}
	at := &origin{rel: rel, line: docLine}
	if hasDataKeys(e.kind()) {
		// Parsed for its positions once, not at each read of its file (a big template, or
		// the services ConfigMap beside the one edited).
		if e.more == nil || e.more.written == nil {
			if item {
				text = undash(text)
			}
			root, items := writtenIn(text, 1, 1, kind)
			if root == nil && len(items) == 1 {
				root = items[0] // a List of one object, known by its document
			}
			if e.more == nil {
				e.more = &entryMore{}
			}
			e.more.written = root
		}
		at.obj = e.more.written.moved(line - 1)
	}
	d.jobs = append(d.jobs, job{at: at, res: e})
	return true
}

// yamlList reads doc, a YAML document starting at line of rel, item by item when it is a List
// written in block style (see splitYAMLList): each item is what a document is to yamlFile.
// false, having added nothing, when it is not such a List, or when an item does not read
// alone (an alias of another item's anchor, an odd layout): the caller converts it whole, as
// before, and reports what is wrong with it.
func (d *manifestDecoder) yamlList(rel string, line int, doc []byte) bool {
	l, ok := splitYAMLList(doc)
	if !ok {
		return false
	}
	hj, err := sigyaml.YAMLToJSONStrict(l.header)
	if err != nil {
		return false
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal(hj, &head) != nil || head.APIVersion == "" || !isList(head.Kind, true) {
		return false
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return false
	}
	var defaults *schema.GroupVersionKind
	itemKind := ""
	if head.Kind != "List" {
		gvk := gv.WithKind(strings.TrimSuffix(head.Kind, "List"))
		defaults, itemKind = &gvk, gvk.Kind
	}
	prefix := gvkString(defaults)
	start := len(d.jobs)
	lines := lineCounter{data: doc}
	for _, it := range l.items {
		d.documents++
		raw := doc[it.start:it.end]
		at := line + lines.at(it.start) - 1
		key := listItemKey(raw, prefix)
		if d.stillIgnored(key, yamlDocument) || d.knownDocument(rel, line, at, raw, key, itemKind, true) {
			continue
		}
		text := undash(raw)
		d.converted++
		j, err := sigyaml.YAMLToJSONStrict(text)
		if err != nil {
			d.jobs = d.jobs[:start]
			return false
		}
		var w docWritten
		if mayHoldDataKeys(j) {
			w.root, _ = writtenIn(text, at, 1, itemKind)
		}
		d.keyedDocument(rel, line, j, defaults, w, key, nil) // named by the List's line, as read whole
	}
	return true
}

// listItemKey is the key of an item of a List by its bytes and the kind its List gives it
// (prefix): the same text is another object in a List of another kind.
func listItemKey(raw []byte, prefix string) docKey {
	k := dataKey(raw)
	if prefix != "" {
		k[0] ^= xxhash.Sum64String(prefix)
		k[1] ^= maphash.String(docSeed, prefix)
	}
	return k
}

// undash is an item of a block sequence as a document of its own: its "-" made a space, so
// that every line keeps its columns (positions in errors stay the file's). A copy.
func undash(raw []byte) []byte {
	out := bytes.Clone(raw)
	if i := bytes.IndexByte(out, '-'); i >= 0 && len(bytes.TrimLeft(out[:i], " ")) == 0 {
		out[i] = ' '
	}
	return out
}

// yamlListSplit is a List document cut apart: the document without its items (apiVersion,
// kind, metadata...), and where each item is.
type yamlListSplit struct {
	header []byte
	items  []yamlItem
}

type yamlItem struct{ start, end int } // offsets in the document; the item's "-" starts it

// mayAlias says whether doc may hold a YAML anchor or alias (&name, *name, where a node can
// start): an item using another's anchor does not read alone. A false alarm (a "*" in a
// string) only costs the whole conversion.
func mayAlias(doc []byte) bool {
	for _, c := range []byte{'&', '*'} {
		for i := 0; ; {
			j := bytes.IndexByte(doc[i:], c)
			if j < 0 {
				break
			}
			i += j + 1
			before := byte(' ')
			if i >= 2 {
				before = doc[i-2]
			}
			if i < len(doc) && strings.IndexByte(" \n[{,:-", before) >= 0 && strings.IndexByte(" \n\r[]{},'\"", doc[i]) < 0 {
				return true
			}
		}
	}
	return false
}

// splitYAMLList cuts doc, a List whose items are a block sequence under a top-level
// "items:" key (as kubectl prints it: "items:" then "- apiVersion: v1" lines), into its header
// and its items, by their lines alone. false for any other layout (flow style, tabs, anchors
// or aliases, a line the cut cannot place), which the caller converts whole.
func splitYAMLList(doc []byte) (yamlListSplit, bool) {
	var s yamlListSplit
	keyAt := -1
	for from := 0; ; {
		i := bytes.Index(doc[from:], []byte("items:"))
		if i < 0 {
			break
		}
		if at := from + i; at == 0 || doc[at-1] == '\n' {
			if keyAt >= 0 {
				return s, false // twice: the whole conversion says so
			}
			keyAt = at
		}
		from += i + len("items:")
	}
	if keyAt < 0 || mayAlias(doc) || bytes.IndexByte(doc, '\t') >= 0 {
		return s, false
	}
	first := lineEnd(doc, keyAt)
	if rest := bytes.TrimSpace(doc[keyAt+len("items:") : first]); len(rest) > 0 && rest[0] != '#' {
		return s, false // items: [...] or items: null
	}
	indent := -1 // of the items' "-"
	pos := first + 1
	for pos < len(doc) {
		end := lineEnd(doc, pos)
		ln := doc[pos:end]
		ind := len(ln) - len(bytes.TrimLeft(ln, " "))
		content := ln[ind:]
		dash := len(content) > 0 && content[0] == '-' && (len(content) == 1 || content[1] == ' ')
		switch {
		case len(content) == 0 || content[0] == '#':
			// blank or a comment: with the item it follows
		case indent < 0 && dash:
			indent = ind
			s.items = append(s.items, yamlItem{start: pos})
		case indent < 0:
			return s, false
		case ind == indent && dash:
			s.items[len(s.items)-1].end = pos
			s.items = append(s.items, yamlItem{start: pos})
		case ind > indent:
			// the item goes on
		case ind == 0:
			s.items[len(s.items)-1].end = pos
			s.header = append(append(bytes.Clone(doc[:keyAt]), doc[pos:]...), '\n')
			return s, true
		default:
			return s, false
		}
		pos = end + 1
	}
	if len(s.items) == 0 {
		return s, false
	}
	s.items[len(s.items)-1].end = len(doc)
	s.header = bytes.Clone(doc[:keyAt])
	return s, true
}

// lineEnd is the offset of the newline that ends the line at pos (len(data) for the last).
func lineEnd(data []byte, pos int) int {
	if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
		return pos + i
	}
	return len(data)
}
