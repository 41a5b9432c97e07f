package jinja

import (
	"html"
	"regexp"
	"strings"
)

// HTML as Markup has it: escaping (markupsafe.escape), unescaping and stripping tags, for
// printing with autoescape, Markup's operators and methods and the HTML filters.

// escapeString is markupsafe.escape.
func escapeString(s string) string {
	if !strings.ContainsAny(s, `&<>'"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\'':
			b.WriteString("&#39;")
		case '"':
			b.WriteString("&#34;")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// escapeValue is escape(v) as Markup's operators apply it to their other operand.
func (e *evaluator) escapeValue(v any) (Markup, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	s, err := e.str(v)
	if err != nil {
		return "", err
	}
	return Markup(escapeString(s)), nil
}

func escapeArgs(v any) any {
	switch x := v.(type) {
	case Tuple:
		return Tuple(escapeArgsList(x))
	case string:
		return Markup(escapeString(x))
	}
	return v
}

func escapeArgsList(a []any) []any {
	out := make([]any, len(a))
	for i, x := range a {
		if s, ok := x.(string); ok {
			out[i] = Markup(escapeString(s))
		} else {
			out[i] = x
		}
	}
	return out
}

func unescapeHTML(s string) string { return html.UnescapeString(s) }

var stripCommentsRE = regexp.MustCompile(`(?s)<!--.*?-->`)

var stripTagsRE = regexp.MustCompile(`(?s)<.*?>`)

// stripTags is markupsafe's Markup.striptags: tags and comments removed, whitespace
// collapsed, entities decoded.
func stripTags(s string) string {
	s = stripCommentsRE.ReplaceAllString(s, "")
	s = stripTagsRE.ReplaceAllString(s, "")
	return unescapeHTML(strings.Join(strings.FieldsFunc(s, isPySpace), " "))
}
