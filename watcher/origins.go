package watcher

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// written is where an object, and the values of its data keys, are written in its file: what
// errors about a ConfigMap's or Secret's keys point at (FILE:LINE:COL). A file's entry keeps
// it while the file does not change (the services ConfigMap's ten thousand keys): compact.
type written struct {
	line int      // the object's first line
	keys []keyPos // each data key once
	// folds are the Origins of the values written as folded block scalars (keyPos.fold).
	folds []snapshot.Origin
}

// keyPos is where the value of one data key is (see snapshot.Origin), its File unset: set when
// the object is added.
type keyPos struct {
	key       string
	line, col int32
	style     snapshot.Style
	fold      int32 // a folded value's: 1 + its index in written.folds; 0 for the others
}

// origin is the Origin of the value of keys[i].
func (w *written) origin(i int) snapshot.Origin {
	k := w.keys[i]
	var og snapshot.Origin
	if k.fold > 0 {
		og = w.folds[k.fold-1] // where its lines start in the value
	}
	og.Line, og.Col, og.Style = int(k.line), int(k.col), k.style
	return og
}

// setKeys makes w's keys those of byKey.
func (w *written) setKeys(byKey map[string]snapshot.Origin) {
	w.keys, w.folds = make([]keyPos, 0, len(byKey)), nil
	for key, og := range byKey {
		k := keyPos{key: key, line: int32(og.Line), col: int32(og.Col), style: og.Style}
		if og.Style == snapshot.Folded {
			w.folds = append(w.folds, og)
			k.fold = int32(len(w.folds))
		}
		w.keys = append(w.keys, k)
	}
}

// moved is w for the same lines n lines further down the file (nil for nil).
func (w *written) moved(n int) *written {
	if w == nil {
		return nil
	}
	out := &written{line: w.line + n, keys: slices.Clone(w.keys), folds: w.folds}
	for i := range out.keys {
		out.keys[i].line += int32(n)
	}
	return out
}

// mayHoldDataKeys tells, from a document converted to JSON, whether it may be (or list) a
// ConfigMap or Secret: only those are parsed again for their positions (a file of pods is not).
func mayHoldDataKeys(j []byte) bool {
	return bytes.Contains(j, []byte(`"kind":"ConfigMap`)) || bytes.Contains(j, []byte(`"kind":"Secret`)) ||
		bytes.Contains(j, []byte(`"kind": "ConfigMap`)) || bytes.Contains(j, []byte(`"kind": "Secret`))
}

// writtenIn reads where the ConfigMaps and Secrets of one YAML (or JSON) document are written:
// the document's own object (root), or each item of its items (items[i]; nil for another
// kind). src is the document; it starts at line and column col of its file; kind is the
// document's kind when it names none (an item of a ConfigMapList). nil, nil when it does not
// parse (the decoder reports why).
func writtenIn(src []byte, line, col int, kind string) (root *written, items []*written) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil || len(doc.Content) == 0 {
		return nil, nil
	}
	p := positions{lines: strings.Split(string(src), "\n"), line: line, col: col}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, nil
	}
	if k := scalarOf(top, "kind"); k != "" {
		kind = k
	}
	if list := valueOf(top, "items"); list != nil && list.Kind == yaml.SequenceNode && strings.HasSuffix(kind, "List") {
		itemKind := strings.TrimSuffix(kind, "List")
		items = make([]*written, len(list.Content))
		for i, it := range list.Content {
			if it.Kind != yaml.MappingNode {
				continue
			}
			k := scalarOf(it, "kind")
			if k == "" {
				k = itemKind
			}
			items[i] = p.object(it, k)
		}
		return nil, items
	}
	return p.object(top, kind), nil
}

// positions turns the positions of a document's nodes into positions in its file.
type positions struct {
	lines     []string // the document's
	line, col int      // where the document starts in the file
}

func (p positions) at(line, col int) snapshot.Position {
	if line == 1 {
		col += p.col - 1
	}
	return snapshot.Position{Line: p.line + line - 1, Col: col}
}

// dataField is a field of an object that maps keys to values; whole: the values are base64,
// whose lines are not the file's.
type dataField struct {
	name  string
	whole bool
}

// object is where the object of mapping n (of kind) and its data keys are written; nil for a
// kind without data keys.
func (p positions) object(n *yaml.Node, kind string) *written {
	var fields []dataField
	switch kind {
	case "ConfigMap":
		fields = []dataField{{"binaryData", true}, {"data", false}}
	case "Secret":
		// stringData last: it wins over data, as the API server folds it.
		fields = []dataField{{"data", true}, {"stringData", false}}
	default:
		return nil
	}
	w := &written{line: p.at(n.Line, 1).Line}
	keys := map[string]snapshot.Origin{} // the last of a key wins (stringData over data)
	for _, m := range fields {
		data := valueOf(n, m.name)
		if data == nil || data.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(data.Content); i += 2 {
			k, v := data.Content[i], data.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			og := snapshot.Origin{Position: p.at(v.Line, v.Column)}
			if !m.whole && v.Kind == yaml.ScalarNode && (v.Style == yaml.LiteralStyle || v.Style == yaml.FoldedStyle) {
				if b, ok := p.block(k, v); ok {
					og = b
				}
			}
			keys[k.Value] = og
		}
	}
	w.setKeys(keys)
	return w
}

// block is the Origin of a block scalar (v, the value of key k), checked by writing its value
// again from the lines of the file: false when that does not give the value the parser read.
func (p positions) block(k, v *yaml.Node) (snapshot.Origin, bool) {
	header := p.lines[v.Line-1]
	if v.Column-1 >= len(header) {
		return snapshot.Origin{}, false
	}
	header = header[v.Column:] // after | or >
	indent := 0
	for _, c := range header {
		if c >= '1' && c <= '9' {
			indent = k.Column - 1 + int(c-'0') // an explicit indentation indicator
			break
		}
		if c != '+' && c != '-' {
			break
		}
	}
	first := v.Line // index in lines of the first line of content
	var content []string
	for i := first; i < len(p.lines); i++ {
		l := p.lines[i]
		spaces := len(l) - len(strings.TrimLeft(l, " "))
		blank := strings.TrimSpace(l) == ""
		if indent == 0 && !blank {
			indent = spaces // the first line with text sets the indentation
		}
		if !blank && (indent == 0 || spaces < indent) {
			break
		}
		content = append(content, l)
	}
	if indent == 0 {
		return snapshot.Origin{}, false
	}
	text := make([]string, len(content))
	for i, l := range content {
		if len(l) > indent {
			text[i] = l[indent:]
		}
	}
	pos := p.at(first+1, indent+1)
	if v.Style == yaml.LiteralStyle {
		if strings.TrimRight(strings.Join(text, "\n"), "\n") != strings.TrimRight(v.Value, "\n") {
			return snapshot.Origin{}, false
		}
		return snapshot.Origin{Position: pos, Style: snapshot.Literal}, true
	}
	starts, value := fold(text)
	if strings.TrimRight(value, "\n") != strings.TrimRight(v.Value, "\n") {
		return snapshot.Origin{}, false
	}
	return snapshot.NewFolded(pos, starts), true
}

// fold folds the lines of a folded block scalar (their indentation removed) as YAML does:
// a line break between two lines of text becomes a space, or is dropped before empty lines
// (each of which is a newline); around a more-indented line, breaks are kept. It returns where
// each line starts in the value (Line 0 for an empty line), and the value.
func fold(lines []string) ([]snapshot.ValuePos, string) {
	var b strings.Builder
	starts := make([]snapshot.ValuePos, len(lines))
	line, col := int32(1), int32(1)
	newlines := func(n int) {
		for range n {
			b.WriteByte('\n')
		}
		if n > 0 {
			line, col = line+int32(n), 1
		}
	}
	text, moreBefore, empty := false, false, 0
	for i, l := range lines {
		if l == "" {
			empty++
			continue
		}
		more := l[0] == ' ' || l[0] == '\t'
		switch {
		case !text:
			newlines(empty)
		case !moreBefore && !more && empty == 0:
			b.WriteByte(' ')
			col++
		case !moreBefore && !more:
			newlines(empty)
		default:
			newlines(empty + 1)
		}
		empty = 0
		starts[i] = snapshot.ValuePos{Line: line, Col: col}
		b.WriteString(l)
		col += int32(utf8.RuneCountInString(l))
		text, moreBefore = true, more
	}
	return starts, b.String()
}

// valueOf is the value of key in mapping n (nil if it has none).
func valueOf(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalarOf is the scalar value of key in mapping n ("" if none).
func scalarOf(n *yaml.Node, key string) string {
	if v := valueOf(n, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}
