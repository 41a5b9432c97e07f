package jinja

import "fmt"

// Binding the arguments of a built-in (filter, test, global, method) as Python binds them.

// noArg marks a parameter that was not given.
type noArgType struct{}

var noArg any = noArgType{}

// bind matches arguments to parameters as Python does; missing ones are noArg.
func bind(name string, a []any, kw map[string]any, params ...string) ([]any, error) {
	if len(a) > len(params) {
		return nil, fmt.Errorf("%s() takes %d positional argument(s) but %d were given", name, len(params), len(a))
	}
	out := make([]any, len(params))
	for i := range out {
		if i < len(a) {
			out[i] = a[i]
		} else {
			out[i] = noArg
		}
	}
	for k, v := range kw {
		i := -1
		for j, p := range params {
			if p == k {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", name, k)
		}
		if i < len(a) {
			return nil, fmt.Errorf("%s() got multiple values for argument '%s'", name, k)
		}
		out[i] = v
	}
	return out, nil
}

// argOr is the argument v, or def when it was not given.
func argOr(v, def any) any {
	if v == noArg {
		return def
	}
	return v
}

func argCount(name string, a []any, min, max int) error {
	if len(a) < min || len(a) > max {
		if min == max {
			return fmt.Errorf("%s() takes exactly %d argument(s) (%d given)", name, min, len(a))
		}
		return fmt.Errorf("%s() takes from %d to %d arguments (%d given)", name, min, max, len(a))
	}
	return nil
}

func noKeywords(name string, kw map[string]any) error {
	if len(kw) > 0 {
		return fmt.Errorf("%s() takes no keyword arguments", name)
	}
	return nil
}
