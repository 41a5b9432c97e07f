package watcher

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	sigyaml "sigs.k8s.io/yaml"
)

// Big ConfigMaps and Secrets, known by their keys. A services ConfigMap of 1,000 services is
// one YAML document of 1,000 data keys: converting it to JSON and parsing it again for the
// positions of its keys took 20 ms, on every edit of any one service. Written in block style,
// its data keys are read one by one instead, each known to the next read by its own lines:
// an edit converts the keys it changed, and the rest of the document (apiVersion, kind,
// metadata), which is small.

// dataSplitMin is the size from which a ConfigMap or Secret is read key by key: below it the
// whole conversion costs little, and stays the one path of almost every document.
const dataSplitMin = 16 << 10

// dataEntry is what one data key's lines gave: its key and value as the whole document's
// conversion gives them, and where its value is (relative: line 1 is the key's line).
type dataEntry struct {
	key    string
	quoted []byte // key as a JSON string
	value  json.RawMessage
	origin *written // the positions writtenIn finds, as if the key's lines started the file
	round  uint32   // the last read that used it
}

// yamlDataSplit is a ConfigMap or Secret document cut apart: the document with its data
// mapping emptied ("data:" alone: null), and where each of that mapping's keys is.
type yamlDataSplit struct {
	header []byte
	keys   []yamlItem // offsets in the document; each starts at its key's line
}

// splitYAMLData cuts doc at the keys of its top-level "data:" block mapping, by their lines
// alone. false for any other layout (no such mapping, or also binaryData or stringData, flow
// style, tabs, anchors or aliases, merge or complex keys, a line the cut cannot place), which
// the caller converts whole, as before.
func splitYAMLData(doc []byte) (yamlDataSplit, bool) {
	var s yamlDataSplit
	if mayAlias(doc) || bytes.IndexByte(doc, '\t') >= 0 {
		return s, false
	}
	keyAt, end := -1, -1 // the "data:" line, and where its mapping ends
	indent := -1         // of the mapping's keys
	for pos := 0; pos < len(doc); {
		lend := lineEnd(doc, pos)
		ln := doc[pos:lend]
		ind := len(ln) - len(bytes.TrimLeft(ln, " "))
		content := ln[ind:]
		inData := keyAt >= 0 && end < 0
		switch {
		case len(content) == 0:
			// blank: with the key it follows (a kept block scalar's trailing lines)
		case ind == 0 && inData:
			if len(s.keys) == 0 {
				return s, false
			}
			end = pos
			if !topLevel(content) {
				return s, false
			}
		case ind == 0:
			if content[0] == '%' || bytes.HasPrefix(content, []byte("...")) {
				return s, false
			}
			if bytes.HasPrefix(content, []byte("data:")) {
				if keyAt >= 0 {
					return s, false // twice: the whole conversion says so
				}
				if rest := bytes.TrimSpace(content[len("data:"):]); len(rest) > 0 && rest[0] != '#' {
					return s, false // data: {...}, null, a tag or an anchor
				}
				keyAt = pos
			} else if !topLevel(content) {
				return s, false
			}
		case !inData:
			// a line of another top-level key's value
		case content[0] == '#':
			// a comment: with the key before (before the first, with none; it is dropped)
		case indent < 0 || ind == indent:
			indent = ind
			if !plainKeyStart(content) {
				return s, false
			}
			if n := len(s.keys); n > 0 {
				s.keys[n-1].end = pos
			}
			s.keys = append(s.keys, yamlItem{start: pos})
		case ind > indent:
			// the key's value goes on
		default:
			return s, false
		}
		pos = lend + 1
	}
	if keyAt < 0 || len(s.keys) == 0 {
		return s, false
	}
	if end < 0 {
		end = len(doc)
	}
	s.keys[len(s.keys)-1].end = end
	dataLine := lineEnd(doc, keyAt)
	s.header = append(append(bytes.Clone(doc[:dataLine]), '\n'), doc[min(end, len(doc)):]...)
	return s, true
}

// topLevel checks a top-level line of the document outside its data mapping: the other
// fields whose keys are data (binaryData, stringData) are not cut, so a document with them is
// converted whole; nor are complex keys, merges and flow or sequence documents.
func topLevel(content []byte) bool {
	for _, k := range []string{"binaryData:", "stringData:", "data:", "? ", "<<", "{", "[", "- "} {
		if bytes.HasPrefix(content, []byte(k)) {
			return false
		}
	}
	return true
}

// plainKeyStart says whether a line of the data mapping starts a key the cut can take alone:
// not a complex key ("? "), a merge ("<<"), a sequence or a flow collection.
func plainKeyStart(content []byte) bool {
	switch content[0] {
	case '?', '-', '{', '[', '!', '&', '*', '|', '>', '%', '@', '`':
		return false
	}
	return !bytes.HasPrefix(content, []byte("<<"))
}

// yamlData reads doc, a ConfigMap or Secret document at line of rel, key by key when its data
// is a block mapping (see splitYAMLData): each key's lines converted alone, or taken from the
// read before when they are the same; then the object is decoded as a whole document's is.
// false, having added nothing, when it is not such a document, or when a key does not read
// alone or two keys are the same: the caller converts it whole and reports what is wrong.
func (d *manifestDecoder) yamlData(rel string, line int, doc []byte, ykey docKey) bool {
	s, ok := splitYAMLData(doc)
	if !ok {
		return false
	}
	hj, err := sigyaml.YAMLToJSONStrict(s.header)
	if err != nil {
		return false
	}
	var head map[string]json.RawMessage
	if json.Unmarshal(hj, &head) != nil || !bytes.Equal(bytes.TrimSpace(head["data"]), []byte("null")) {
		return false
	}
	var kind string
	if json.Unmarshal(head["kind"], &kind) != nil || kind != "ConfigMap" && kind != "Secret" {
		return false
	}
	root, _ := writtenIn(s.header, line, 1, "")
	if root == nil {
		return false
	}
	keys := make(map[string]snapshot.Origin, len(s.keys))
	lines := lineCounter{data: doc}
	entries := make([]*dataEntry, len(s.keys))
	seen := make(map[string]bool, len(s.keys))
	for i, k := range s.keys {
		e := d.dataEntry(doc[k.start:k.end], kind, k.end == len(doc))
		if e == nil || seen[e.key] {
			return false
		}
		seen[e.key] = true
		entries[i] = e
		at := line + lines.at(k.start) - 1
		for i, k := range e.origin.keys {
			og := e.origin.origin(i)
			og.Line += at - 1
			keys[k.key] = og
		}
	}
	root.setKeys(keys)
	// The header's JSON with the keys' in place of its null: the fields keep their order (and
	// so do the errors of a strict decoding). The keys' values are JSON already.
	null := []byte(`"data":null`)
	at := bytes.Index(hj, null)
	if at < 0 || bytes.Count(hj, null) != 1 {
		return false // also in another field's value: the whole conversion has no doubt
	}
	j := make([]byte, 0, len(hj)+len(doc))
	j = append(append(j, hj[:at]...), `"data":{`...)
	for i, e := range entries {
		if i > 0 {
			j = append(j, ',')
		}
		j = append(append(append(j, e.quoted...), ':'), e.value...)
	}
	j = append(append(j, '}'), hj[at+len(null):]...)
	d.converted++
	d.byKey++
	d.keyedDocument(rel, line, j, nil, docWritten{root: root}, ykey, entries)
	return true
}

// dataEntry is what the lines of one data key of an object of kind give (from the cache when
// an earlier read had the same lines); nil when they do not read alone as one key. last says
// its lines end the document.
func (d *manifestDecoder) dataEntry(text []byte, kind string, last bool) *dataEntry {
	// A Secret's data is base64: its positions differ. The positions of a block scalar's lines
	// differ at the end of the document (see below).
	key := listItemKey(text, kind+"/"+strconv.FormatBool(last))
	round := d.cache.round + 1 // the round decodeJobs starts for this read
	if e := d.cache.dataEntries[key]; e != nil {
		e.round = round
		return e
	}
	d.dataKeys++
	j, err := sigyaml.YAMLToJSONStrict(text)
	if err != nil {
		return nil
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(j, &one) != nil || len(one) != 1 {
		return nil
	}
	e := &dataEntry{round: round}
	for k, v := range one {
		e.key, e.value = k, v
	}
	if e.quoted, err = json.Marshal(e.key); err != nil {
		return nil
	}
	// Its positions as in a ConfigMap whose data starts on the line before it. Within the
	// document its last newline is followed by a less indented line, not by the empty line
	// after the document's last newline.
	at := text
	if !last {
		at = bytes.TrimSuffix(text, []byte("\n"))
	}
	e.origin, _ = writtenIn(append([]byte("data:\n"), at...), 0, 1, kind)
	if e.origin == nil {
		return nil
	}
	if d.cache.dataEntries == nil {
		d.cache.dataEntries = map[docKey]*dataEntry{}
	}
	d.cache.dataEntries[key] = e
	return e
}
