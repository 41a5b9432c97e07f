package render

import (
	"fmt"
	"sort"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
)

// Auxiliary files: map files and other files (Lua scripts, error pages, plain files) written
// beside haproxy.cfg in the same generation, from keys of the template set. ConfigMap keys
// cannot hold "/", so a key says by its name what it is:
//
//   - NAME.map: a map file, rendered as a template (with the same context as the main
//     template) and written as <mapsdir>/NAME.map;
//   - files.NAME: a file copied as it is, byte for byte, to <filesdir>/NAME (Lua tables
//     `{{...}}` and client-side templates in error pages stay intact);
//   - files.NAME.j2: a file rendered as a template, written as <filesdir>/NAME.
//
// Every key, these included, stays a template other templates can {% include %} by name, as
// before. The main template's key is never a file. A file name (NAME.map, or NAME after
// "files." without ".j2") is letters, digits, '-' and '_' with at most one extension
// (content.CheckFileName): anything else is a render error naming the key.
const (
	// MapSuffix ends the keys rendered as map files.
	MapSuffix = ".map"
	// FilePrefix starts the keys written as other files.
	FilePrefix = "files."
	// TemplateSuffix ends the file keys rendered as templates rather than copied.
	TemplateSuffix = ".j2"
)

type auxKind int

const (
	auxMap auxKind = iota
	auxFile
)

// aux is one key of the template set written as a file.
type aux struct {
	key, name string // the template key, and the file's name in its directory
	kind      auxKind
	render    bool // rendered as a template (else copied as it is)
}

// auxNameError is a key whose file name cannot be one.
type auxNameError struct {
	key string
	err error
}

func (e *auxNameError) Error() string {
	return fmt.Sprintf("key %q: %v", e.key, e.err)
}

func (e *auxNameError) Unwrap() error { return e.err }

// auxFiles lists the keys of srcs written as files, in key order: an *auxNameError for the
// first whose file name cannot be one.
func auxFiles(srcs map[string]string, mainKey string) ([]aux, error) {
	keys := make([]string, 0, len(srcs))
	for k := range srcs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []aux
	for _, key := range keys {
		if key == mainKey {
			continue
		}
		a, ok := classify(key)
		if !ok {
			continue
		}
		if err := content.CheckFileName(a.name); err != nil {
			return nil, &auxNameError{key: key, err: err}
		}
		out = append(out, a)
	}
	return out, nil
}

// classify says whether a template key is a file, and which.
func classify(key string) (aux, bool) {
	if name, ok := strings.CutPrefix(key, FilePrefix); ok {
		a := aux{key: key, name: name, kind: auxFile}
		if n, ok := strings.CutSuffix(name, TemplateSuffix); ok {
			a.name, a.render = n, true
		}
		return a, true
	}
	if strings.HasSuffix(key, MapSuffix) {
		return aux{key: key, name: key, kind: auxMap, render: true}, true
	}
	return aux{}, false
}
