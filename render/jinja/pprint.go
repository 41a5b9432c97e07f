package jinja

import (
	"regexp"
	"sort"
	"strings"
)

// pformat is Python's pprint.pformat(v) (width 80, dicts sorted by key), which Jinja2's
// pprint filter calls: the repr when it fits, else dicts, lists, tuples and strings broken
// over lines.
func pformat(v any) (string, error) {
	var b strings.Builder
	if err := ppFormat(&b, v, 0, 0, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const ppWidth = 80

// ppRepr is pprint's repr: dicts with sorted keys, at any depth.
func ppRepr(v any) (string, error) {
	var b strings.Builder
	if err := ppWriteRepr(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func ppWriteRepr(b *strings.Builder, v any, depth int) error {
	if depth > maxReprDepth {
		return writeRepr(b, v, depth)
	}
	switch {
	case isMapping(v):
		items := ppSortedItems(v)
		b.WriteByte('{')
		for i, it := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := ppWriteRepr(b, it[0], depth+1); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := ppWriteRepr(b, it[1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case isList(v):
		items := listItems(v)
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := ppWriteRepr(b, it, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case isTupleVal(v):
		items := v.(Tuple)
		b.WriteByte('(')
		for i, it := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := ppWriteRepr(b, it, depth+1); err != nil {
				return err
			}
		}
		if len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
		return nil
	}
	return writeRepr(b, v, depth)
}

func ppSortedItems(m any) [][2]any {
	var items [][2]any
	eachItem(m, func(k, v any) bool {
		items = append(items, [2]any{k, v})
		return true
	})
	sort.SliceStable(items, func(i, j int) bool {
		c, err := compare(items[i][0], items[j][0], "<")
		if err != nil {
			return typeName(items[i][0]) < typeName(items[j][0])
		}
		return c < 0
	})
	return items
}

func ppFormat(b *strings.Builder, v any, indent, allowance, level int) error {
	rep, err := ppRepr(v)
	if err != nil {
		return err
	}
	if len([]rune(rep)) <= ppWidth-indent-allowance {
		b.WriteString(rep)
		return nil
	}
	level++
	switch {
	case isMapping(v):
		b.WriteByte('{')
		items := ppSortedItems(v)
		indent++
		for i, it := range items {
			last := i == len(items)-1
			krep, err := ppRepr(it[0])
			if err != nil {
				return err
			}
			b.WriteString(krep)
			b.WriteString(": ")
			al := 1
			if last {
				al = allowance + 1
			}
			if err := ppFormat(b, it[1], indent+len([]rune(krep))+2, al, level); err != nil {
				return err
			}
			if !last {
				b.WriteString(",\n" + strings.Repeat(" ", indent))
			}
		}
		b.WriteByte('}')
		return nil
	case isList(v):
		b.WriteByte('[')
		if err := ppItems(b, listItems(v), indent, allowance+1, level); err != nil {
			return err
		}
		b.WriteByte(']')
		return nil
	case isTupleVal(v):
		t := v.(Tuple)
		end := ")"
		if len(t) == 1 {
			end = ",)"
		}
		b.WriteByte('(')
		if err := ppItems(b, t, indent, allowance+len(end), level); err != nil {
			return err
		}
		b.WriteString(end)
		return nil
	}
	if s, ok := v.(string); ok {
		return ppString(b, s, indent, allowance, level)
	}
	if t, ok := v.(*tainted); ok {
		return ppString(b, t.s, indent, allowance, level)
	}
	b.WriteString(rep)
	return nil
}

func ppItems(b *strings.Builder, items []any, indent, allowance, level int) error {
	indent++
	for i, it := range items {
		last := i == len(items)-1
		if i > 0 {
			b.WriteString(",\n" + strings.Repeat(" ", indent))
		}
		al := 1
		if last {
			al = allowance
		}
		if err := ppFormat(b, it, indent, al, level); err != nil {
			return err
		}
	}
	return nil
}

var ppWordRE = regexp.MustCompile(`\S*\s*`)

func ppString(b *strings.Builder, s string, indent, allowance, level int) error {
	if s == "" {
		b.WriteString(reprString(s))
		return nil
	}
	var chunks []string
	lines := splitLines(s, true)
	if level == 1 {
		indent++
		allowance++
	}
	maxWidth1 := ppWidth - indent
	maxWidth := maxWidth1
	var rep string
	for i, line := range lines {
		rep = reprString(line)
		if i == len(lines)-1 {
			maxWidth1 -= allowance
		}
		if len([]rune(rep)) <= maxWidth1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := ppWordRE.FindAllString(line, -1)
		if len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		maxWidth2 := maxWidth
		current := ""
		for j, part := range parts {
			candidate := current + part
			if j == len(parts)-1 && i == len(lines)-1 {
				maxWidth2 -= allowance
			}
			if len([]rune(reprString(candidate))) > maxWidth2 {
				if current != "" {
					chunks = append(chunks, reprString(current))
				}
				current = part
			} else {
				current = candidate
			}
		}
		if current != "" {
			chunks = append(chunks, reprString(current))
		}
	}
	if len(chunks) == 1 {
		b.WriteString(rep)
		return nil
	}
	if level == 1 {
		b.WriteByte('(')
	}
	for i, c := range chunks {
		if i > 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent))
		}
		b.WriteString(c)
	}
	if level == 1 {
		b.WriteByte(')')
	}
	return nil
}

func fPprint(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("pprint", a, kw); err != nil {
		return nil, err
	}
	if holdsSecret(in, 0) {
		e.taint.secret = true
	}
	return pformat(in)
}
