package watcher

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// The JSON fast path: one validating pass over a JSON manifest file finds its objects, their
// apiVersion and kind, and the items of Lists, without decoding anything. It accepts only
// what the slow path (encoding/json, see jsonFile and document) reads the same way without an
// error; on anything else (a syntax error, a key that encoding/json would match case-
// insensitively, an escaped key, a nested List, ...) it gives up and the slow path reads the
// file, with its exact messages.
//
// The items of a List are only delimited (strings and brackets followed): an item whose bytes
// were decoded before is valid; any other is validated by validItem.

// head is what the slow path reads of an object before decoding it.
type head struct {
	apiVersion, kind string
	hasItems         bool
	items            []span // the objects of the "items" array, delimited but not validated
	start, end       int    // the object
}

type span struct{ start, end int }

type jsonScanner struct {
	data  []byte
	depth int
}

// maxDepth bounds nesting like encoding/json does (it allows 10000).
const maxDepth = 10000

// scanJSONFile validates data (but the items of Lists) and returns its top-level objects, or
// ok false when the slow path must read the file.
func scanJSONFile(data []byte) (docs []head, ok bool) {
	s := &jsonScanner{data: data}
	i := s.ws(0)
	for i < len(data) {
		if data[i] != '{' {
			return nil, false
		}
		var h head
		end, ok := s.object(i, &h, true)
		if !ok {
			return nil, false
		}
		docs = append(docs, h)
		i = s.ws(end)
	}
	return docs, true
}

// validItem validates the item at sp (an object without items of its own) and reads its head.
func validItem(data []byte, sp span) (head, bool) {
	s := &jsonScanner{data: data}
	var h head
	end, ok := s.object(sp.start, &h, false)
	return h, ok && end == sp.end
}

// object validates the object at i and returns the offset after it. With h set, it reads the
// object's apiVersion and kind, and with items set, delimits the objects of its items.
func (s *jsonScanner) object(i int, h *head, items bool) (int, bool) {
	if s.depth++; s.depth > maxDepth {
		return 0, false
	}
	d := s.data
	if h != nil {
		h.start = i
	}
	i = s.ws(i + 1)
	if i < len(d) && d[i] == '}' {
		if h != nil {
			h.end = i + 1
		}
		s.depth--
		return i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, false
		}
		kstart := i + 1
		kend, escaped, ok := s.str(i)
		if !ok {
			return 0, false
		}
		i = s.ws(kend)
		if i >= len(d) || d[i] != ':' {
			return 0, false
		}
		i = s.ws(i + 1)
		switch {
		case h == nil:
			i, ok = s.value(i)
		case escaped:
			return 0, false // it could unescape to one of the head's keys
		default:
			i, ok = s.headField(i, string(d[kstart:kend-1]), h, items)
		}
		if !ok {
			return 0, false
		}
		i = s.ws(i)
		if i >= len(d) {
			return 0, false
		}
		switch d[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			if h != nil {
				h.end = i + 1
			}
			s.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// headField reads the value of key at i into h when key is apiVersion, kind or items.
func (s *jsonScanner) headField(i int, key string, h *head, items bool) (int, bool) {
	d := s.data
	switch key {
	case "apiVersion", "kind":
		if i >= len(d) || d[i] != '"' {
			return 0, false
		}
		end, escaped, ok := s.str(i)
		if !ok || escaped || !utf8.Valid(d[i+1:end-1]) {
			return 0, false // encoding/json would unescape, or replace invalid UTF-8
		}
		v := string(d[i+1 : end-1])
		if key == "kind" {
			if h.kind != "" || v == "" {
				return 0, false // a duplicate (the last would win) or empty: the slow path
			}
			h.kind = v
		} else {
			if h.apiVersion != "" || v == "" {
				return 0, false
			}
			h.apiVersion = v
		}
		return end, true
	case "items":
		if h.hasItems || !items {
			return 0, false
		}
		h.hasItems = true
		return s.split(i, &h.items)
	}
	for _, n := range []string{"apiVersion", "kind", "items"} {
		if strings.EqualFold(key, n) {
			return 0, false
		}
	}
	return s.value(i)
}

// split delimits the objects of the array at i, without validating them.
func (s *jsonScanner) split(i int, out *[]span) (int, bool) {
	d := s.data
	if i >= len(d) || d[i] != '[' {
		return 0, false
	}
	i = s.ws(i + 1)
	if i < len(d) && d[i] == ']' {
		return i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '{' {
			return 0, false
		}
		end, ok := skipObject(d, i)
		if !ok {
			return 0, false
		}
		*out = append(*out, span{i, end})
		i = s.ws(end)
		if i >= len(d) {
			return 0, false
		}
		switch d[i] {
		case ',':
			i = s.ws(i + 1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// skipObject returns the offset after the object at i, following only strings and brackets.
func skipObject(d []byte, i int) (int, bool) {
	end := scanValue(d[i:])
	return i + end, end > 0
}

// scanValue returns the offset after the JSON value d starts with, following only strings and
// brackets (not validating), or -1 when d ends first.
func scanValue(d []byte) int {
	if len(d) == 0 {
		return -1
	}
	switch d[0] {
	case '{', '[':
		depth := 0
		for i := 0; i < len(d); i++ {
			for i < len(d) && !structural[d[i]] {
				i++
			}
			if i == len(d) {
				break
			}
			switch d[i] {
			case '"':
				if i = stringEnd(d, i); i < 0 {
					return -1
				}
				i-- // at the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	case '"':
		return stringEnd(d, 0)
	}
	for i, c := range d {
		switch c {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return -1
}

// stringEnd returns the offset after the string whose opening quote is at i, or -1.
func stringEnd(d []byte, i int) int {
	for {
		q := bytes.IndexByte(d[i+1:], '"')
		if q < 0 {
			return -1
		}
		i += 1 + q
		n := 0
		for d[i-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// structural marks the bytes scanValue stops at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// array validates the array at i.
func (s *jsonScanner) array(i int) (int, bool) {
	if s.depth++; s.depth > maxDepth {
		return 0, false
	}
	d := s.data
	i = s.ws(i + 1)
	if i < len(d) && d[i] == ']' {
		s.depth--
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = s.value(i); !ok {
			return 0, false
		}
		i = s.ws(i)
		if i >= len(d) {
			return 0, false
		}
		switch d[i] {
		case ',':
			i = s.ws(i + 1)
		case ']':
			s.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (s *jsonScanner) ws(i int) int {
	for i < len(s.data) {
		switch s.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
func (s *jsonScanner) value(i int) (int, bool) {
	d := s.data
	if i >= len(d) {
		return 0, false
	}
	switch c := d[i]; {
	case c == '"':
		end, _, ok := s.str(i)
		return end, ok
	case c == '{':
		return s.object(i, nil, false)
	case c == '[':
		return s.array(i)
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(i)
	case c == 't':
		return s.literal(i, "true")
	case c == 'f':
		return s.literal(i, "false")
	case c == 'n':
		return s.literal(i, "null")
	}
	return 0, false
}

func (s *jsonScanner) literal(i int, lit string) (int, bool) {
	if len(s.data)-i < len(lit) || string(s.data[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// str validates the string at i (at its opening quote) and returns the offset after the
// closing quote, and whether it holds escapes.
func (s *jsonScanner) str(i int) (end int, escaped, ok bool) {
	d := s.data
	for i++; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			i++
			if i >= len(d) {
				return 0, false, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(d)-i < 5 {
					return 0, false, false
				}
				for _, h := range d[i+1 : i+5] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 4
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func (s *jsonScanner) number(i int) (int, bool) {
	d := s.data
	digits := func(i int) (int, bool) {
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if d[i] == '-' {
		i++
	}
	if i >= len(d) {
		return 0, false
	}
	if d[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return 0, false
		}
	}
	if i < len(d) && d[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return 0, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return 0, false
		}
	}
	return i, true
}
