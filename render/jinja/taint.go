package jinja

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

// UnsafeValueError is the printing of a value from the data that holds a newline, a
// carriage return or a NUL.
type UnsafeValueError struct {
	Value  string // what would have been printed
	Source string // the data string it came from: search the data for it to name the origin
}

func (e *UnsafeValueError) Error() string {
	return "the printed value " + quoteShort(e.Value) + " comes from the data and holds " + forbiddenName(e.Value) +
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

// retaint marks the result of an operation on tainted inputs: strings that still hold a
// forbidden character (also inside a result list) stay tainted.
func retaint(v any, src string) any {
	switch x := v.(type) {
	case string:
		if hasForbidden(x) {
			return &tainted{s: x, src: src}
		}
	case Markup:
		if hasForbidden(string(x)) {
			return &tainted{s: string(x), src: src}
		}
	case *List:
		for i, e := range x.items {
			x.items[i] = retaint(e, src)
		}
	case Tuple:
		for i, e := range x {
			x[i] = retaint(e, src)
		}
	case *generator:
		for i, e := range x.items {
			x.items[i] = retaint(e, src)
		}
	}
	return v
}

// plain returns the plain value behind a tainted one, noting that the operation under way
// consumed tainted text (see evaluator.guard).
func (e *evaluator) plain(v any) any {
	if t, ok := v.(*tainted); ok {
		e.taint = t.src
		return t.s
	}
	return v
}
