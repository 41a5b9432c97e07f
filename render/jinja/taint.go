package jinja

import "errors"

// Data cannot inject configuration: a string from the data that holds a newline, a carriage
// return or a NUL would start a new line of haproxy.cfg if printed. Such a string is carried
// as *tainted from where it leaves the data (an attribute, an item, a loop over the data);
// operations on it (filters, methods, ~, +, %, format...) give a tainted result when the
// result still holds one of those characters; printing a tainted value is an error unless
// the template marks it |safe. Template text and the template's own string literals are
// never tainted, so `{{ names|join('\n    ') }}` prints as long as the names are clean, and
// the output of macros, call blocks, {% set %} and {% filter %} blocks and includes (whose
// prints were checked one by one) is not tainted either.
//
// Checking costs one scan of each string read from the data; nothing is copied. The type
// (tainted) and the check where a string leaves the data (fromData) are with the values
// (value.go); here, what printing and operations do with it.
//
// Secrets ride the same carrier: a secret value (Secret: the stats password, an environment
// value marked secret) is a tainted string with its secret bit set, and an operation that
// consumed one gives a marked result whatever it holds: |reverse, a slice, .replace(), |upper,
// ~, %, .format(), |join, the chars of a loop over it, the output of a {% set %} block, a
// macro, a {% filter %} block that printed it. Printing a secret-marked value is no error:
// where its bytes land in the output is recorded (Output.Secret), so that the lines they are
// on can be withheld from every message that would quote them. Numbers computed from a
// secret (|length, |int) are not marked.

// UnsafeValueError is the printing of a value from the data that holds a newline, a
// carriage return or a NUL.
type UnsafeValueError struct {
	Value  string // what would have been printed
	Source string // the data string it came from: search the data for it to name the origin
	Secret bool   // Value is derived from a secret value: never quote it
}

func (e *UnsafeValueError) Error() string {
	what := quoteShort(e.Value)
	if e.Secret {
		what = "(derived from a secret value, not shown)"
	}
	return "the printed value " + what + " comes from the data and holds " + forbiddenName(e.Value) +
		", which would start a new line in the output: mark it |safe if that is intended"
}

func forbiddenName(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			return "a newline"
		case '\r':
			return "a carriage return"
		case 0:
			return "a NUL character"
		}
	}
	return "a forbidden character"
}

func quoteShort(s string) string {
	r, _ := repr(s)
	if len(r) > 80 {
		r = r[:77] + "..."
	}
	return r
}

// mark is what the operation under way consumed of marked text (see evaluator.taint): the
// data string behind text holding a forbidden character, and whether any of it was derived
// from a secret value.
type mark struct {
	src    string
	secret bool
}

func (m mark) any() bool { return m.src != "" || m.secret }

// on marks s, the result of an operation that consumed m: tainted when it still holds a
// forbidden character from the data, and whatever it holds when a secret went into it.
func (m mark) on(s string, markup bool) any {
	nl := m.src != "" && hasForbidden(s)
	if !nl && !m.secret {
		if markup {
			return Markup(s)
		}
		return s
	}
	t := &tainted{s: s, secret: m.secret, markup: markup}
	if nl {
		t.src = m.src
	}
	return t
}

// retaint marks the result of an operation on marked inputs: strings that still hold a
// forbidden character, and every string when a secret went in (also inside a result list).
func retaint(v any, m mark) any {
	switch x := v.(type) {
	case string:
		return m.on(x, false)
	case Markup:
		return m.on(string(x), true)
	case *List:
		x.changing()
		for i, e := range x.items {
			x.items[i] = retaint(e, m)
		}
	case Tuple:
		for i, e := range x {
			x[i] = retaint(e, m)
		}
	case *generator:
		for i, e := range x.items {
			x.items[i] = retaint(e, m)
		}
	}
	return v
}

// plain returns the plain value behind a marked one, noting that the operation under way
// consumed marked text (see evaluator.guard).
func (e *evaluator) plain(v any) any {
	if t, ok := v.(*tainted); ok {
		e.consume(t)
		return t.s
	}
	return v
}

// consume notes that the operation under way used t's text.
func (e *evaluator) consume(t *tainted) {
	if t.src != "" {
		e.taint.src = t.src
	}
	if t.secret {
		e.taint.secret = true
	}
}

// holdsSecret reports whether v, a list, tuple or dict printed or converted as a whole (its
// repr), holds a value derived from a secret. Only the template's own containers and the
// context's plain maps can: the data's records never do.
func holdsSecret(v any, depth int) bool {
	if depth > maxReprDepth {
		return false
	}
	switch x := v.(type) {
	case *tainted:
		return x.secret
	case *List:
		return anySecret(x.items, depth)
	case Tuple:
		return anySecret(x, depth)
	case []any:
		return anySecret(x, depth)
	case *Dict:
		return anySecret(x.keys, depth) || anySecret(x.vals, depth)
	case map[string]any:
		for _, e := range x {
			if holdsSecret(e, depth+1) {
				return true
			}
		}
	case []map[string]any:
		for _, e := range x {
			if holdsSecret(e, depth+1) {
				return true
			}
		}
	case *dictView:
		return holdsSecret(x.d, depth+1)
	case *generator:
		return anySecret(x.items, depth)
	case *module:
		return x.secret
	}
	return false
}

func anySecret(items []any, depth int) bool {
	for _, e := range items {
		if holdsSecret(e, depth+1) {
			return true
		}
	}
	return false
}

// withheldValue stands for a value derived from a secret in an error message.
const withheldValue = "(a value derived from a secret, not shown)"

// withheld is the error of an operation that consumed a secret-marked value: its message
// could quote the value (Python's messages do: "invalid literal for int() with base 10:
// '...'", "KeyError: '...'"), so only what failed is said. errors.As still finds the cause.
type withheld struct {
	kind, name string // "filter", "upper"; "method", "pop"; "operator", "+"
	err        error
}

func (w *withheld) Error() string {
	what := w.kind + " " + w.name
	if w.kind == "method" {
		what += "()"
	}
	return "the " + what + " failed on a value derived from a secret (the message is withheld, it could quote the value)"
}

func (w *withheld) Unwrap() error { return w.err }

// guardSecret is err, withheld when the operation that failed (kind, name) consumed a secret
// (m); budget errors quote nothing and stay as they are.
func guardSecret(err error, m mark, kind, name string) error {
	if err == nil || !m.secret {
		return err
	}
	var le *LimitError
	var w *withheld
	if errors.As(err, &le) || errors.As(err, &w) {
		return err
	}
	return &withheld{kind: kind, name: name, err: err}
}
