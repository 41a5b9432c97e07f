package runtimeapi

import (
	"bytes"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// A map file whose change is one entry (one route added or deleted) goes live as that entry,
// one command, rather than as a swap of every entry (swapMaps: prepare, the whole file in
// payloads, commit: at 10,000 entries, about half a megabyte through the runtime API):
//
//	add map <path> <key> <value>    a key the map does not have
//	set map <path> <key> <value>    a key it has once, another value
//	del map <path> <key>            a key it has once, gone
//
// Each is atomic, and order does not matter, when every use of the map looks it up in a tree:
// the map (exact key) and map_beg (longest prefix) converters. The other matches (map_reg,
// map_sub, map_end, map_dom, ..., and ACLs reading the file) run through a list in file order,
// which add map cannot place an entry in: those maps are swapped, as is a change of more than
// one entry (two commands would show a half-changed map between them) or of a key the map has
// more than once.

// mapEdit is the one entry a map file's change adds, sets or deletes.
type mapEdit struct {
	op         string // "add", "set", "del"
	key, value string
}

func (e *mapEdit) line(path string) string {
	if e.op == "del" {
		return "del map " + path + " " + e.key
	}
	return e.op + " map " + path + " " + e.key + " " + e.value
}

// entryEdit finds the edit that turns the map file old into new, when their entries (as HAProxy
// reads them: eachMapEntry) differ by one: ok is false otherwise, or when the key or value is
// not one word on a command line (checkToken), or when the key is another entry's too. same is
// true when the entries are the same (comments or spacing changed). Only the lines between
// what both files begin and end with are read.
func entryEdit(old, new []byte, limit int) (e mapEdit, same, ok bool) {
	oldMid, newMid, head, tail := changedLines(old, new)
	var oe, ne []mapEdit
	collect := func(to *[]mapEdit) func(k, v string, _ int) {
		return func(k, v string, _ int) { *to = append(*to, mapEdit{key: k, value: v}) }
	}
	if _, err := eachMapEntry(oldMid, limit, collect(&oe)); err != nil || len(oe) > 1 {
		return mapEdit{}, false, false
	}
	if _, err := eachMapEntry(newMid, limit, collect(&ne)); err != nil || len(ne) > 1 {
		return mapEdit{}, false, false
	}
	switch {
	case len(oe) == 0 && len(ne) == 0:
		return mapEdit{}, true, true
	case len(oe) == 0:
		e = mapEdit{op: "add", key: ne[0].key, value: ne[0].value}
	case len(ne) == 0:
		e = mapEdit{op: "del", key: oe[0].key}
	case oe[0].key != ne[0].key:
		return mapEdit{}, false, false
	case oe[0].value == ne[0].value:
		return mapEdit{}, true, true
	default:
		e = mapEdit{op: "set", key: ne[0].key, value: ne[0].value}
	}
	if checkToken(e.key) != nil || e.op != "del" && checkToken(e.value) != nil || strings.HasSuffix(e.line("/"), "<<") {
		return mapEdit{}, false, false // "<<" ending a line starts a payload
	}
	if hasKey(head, e.key) || hasKey(tail, e.key) {
		return mapEdit{}, false, false
	}
	return e, false, true
}

// changedLines cuts the lines old and new begin with (head) and end with (tail) off both:
// what is left of each is whole lines.
func changedLines(old, new []byte) (oldMid, newMid, head, tail []byte) {
	p := 0
	for p < len(old) && p < len(new) && old[p] == new[p] {
		p++
	}
	p = bytes.LastIndexByte(old[:p], '\n') + 1 // the start of the line that differs
	s := 0
	for s < len(old)-p && s < len(new)-p && old[len(old)-1-s] == new[len(new)-1-s] {
		s++
	}
	// The tail starts at a line's start in both: after a newline, or at p (a line's start).
	lineStart := func(b []byte, i int) bool { return i == p || b[i-1] == '\n' }
	for s > 0 && !(lineStart(old, len(old)-s) && lineStart(new, len(new)-s)) {
		s--
	}
	return old[p : len(old)-s], new[p : len(new)-s], old[:p], old[len(old)-s:]
}

// hasKey says whether content may have an entry of key: a line whose first word (after spaces
// and tabs) is key. It may say so of a comment line too; never the other way.
func hasKey(content []byte, key string) bool {
	k := []byte(key)
	for i := 0; ; {
		j := bytes.Index(content[i:], k)
		if j < 0 {
			return false
		}
		at, end := i+j, i+j+len(k)
		start := bytes.LastIndexByte(content[:at], '\n') + 1
		if len(bytes.Trim(content[start:at], " \t")) == 0 && (end == len(content) || strings.IndexByte(" \t\r\n", content[end]) >= 0) {
			return true
		}
		i = at + 1
	}
}

// treeConverters are the converters that look a map file up in a tree.
var treeConverters = []string{"map", "map_str", "map_beg", "map_str_int", "map_str_ip", "map_beg_int", "map_beg_ip", "map_beg_str", "map_str_str"}

// treeOnly says whether every mention of path in cfg is the map file of a converter that
// looks it up in a tree (treeConverters): then one entry added, set or deleted changes what
// every lookup finds as a reload of the file would.
func treeOnly(cfg *cfgparse.Config, path string) bool {
	found := false
	for _, s := range cfg.Sections {
		for _, l := range s.Lines {
			for i := 0; ; {
				j := strings.Index(l[i:], path)
				if j < 0 {
					break
				}
				at := i + j
				if !afterTreeConverter(l[:at]) {
					return false
				}
				end := at + len(path)
				if end < len(l) && l[end] != ',' && l[end] != ')' {
					return false // another file whose name starts as this one's
				}
				found = true
				i = end
			}
		}
	}
	return found
}

// afterTreeConverter says whether before ends with the opening of a tree converter: "map(".
func afterTreeConverter(before string) bool {
	rest, ok := strings.CutSuffix(before, "(")
	if !ok {
		return false
	}
	for _, c := range treeConverters {
		if name, ok := strings.CutSuffix(rest, c); ok && (name == "" || strings.IndexByte(",( \t", name[len(name)-1]) >= 0) {
			return true
		}
	}
	return false
}
