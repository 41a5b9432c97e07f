package jinja

import "fmt"

// What Compile takes beside the sources, and the error it and Render return.

// Error is an error in a template, located at a line and column of one of the set's keys.
type Error struct {
	Template  string
	Line, Col int
	Err       error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("template %q line %d column %d: %v", e.Template, e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("template %q: %v", e.Template, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Filter is an extra filter given to Compile: the value, the positional and the keyword
// arguments.
type Filter func(v any, args []any, kwargs map[string]any) (any, error)

// Options configure Compile.
type Options struct {
	// Filters are extra filters, beside Jinja2's; they win over pongo2's of the same name.
	Filters map[string]Filter
}
