package jinja

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Jinja2's tests (jinja2/tests.py): `x is name(args)`. The tests filter and test, which take
// the names of other built-ins, are with the tables of names (builtins.go).

// jinjaTest finds one of Jinja2's tests by name (but filter and test).
func jinjaTest(name string) testFunc {
	switch name {
	case "odd", "even":
		return tModulo(name)
	case "divisibleby":
		return tDivisibleby
	case "defined":
		return tDefined
	case "undefined":
		return tUndefined
	case "none":
		return predicate(func(v any) bool { return v == nil })
	case "boolean":
		return predicate(func(v any) bool { _, ok := v.(bool); return ok })
	case "false":
		return predicate(func(v any) bool { b, ok := v.(bool); return ok && !b })
	case "true":
		return predicate(func(v any) bool { b, ok := v.(bool); return ok && b })
	case "integer":
		return predicate(isInteger)
	case "float":
		return predicate(func(v any) bool { _, ok := v.(float64); return ok })
	case "number":
		return predicate(func(v any) bool { return toNum(v).kind != 0 })
	case "string":
		return predicate(func(v any) bool { _, ok := strValue(v); return ok })
	case "mapping":
		return predicate(isMapping)
	case "lower", "upper":
		return tCase(name)
	case "sequence":
		return predicate(isSequence)
	case "iterable":
		return predicate(isIterable)
	case "callable":
		return predicate(isCallable)
	case "sameas":
		return tSameas
	case "escaped":
		return predicate(func(v any) bool { _, ok := v.(Markup); return ok })
	case "in":
		return tIn
	case "==", "eq", "equalto":
		return cmpTest("==")
	case "!=", "ne":
		return cmpTest("!=")
	case ">", "gt", "greaterthan":
		return cmpTest(">")
	case ">=", "ge":
		return cmpTest(">=")
	case "<", "lt", "lessthan":
		return cmpTest("<")
	case "<=", "le":
		return cmpTest("<=")
	}
	return nil
}

func tDefined(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	_, undef := in.(*Undefined)
	return !undef, nil
}

func tUndefined(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	_, undef := in.(*Undefined)
	return undef, nil
}

// tCase is the lower and upper tests: the value printed is all lower (upper) case.
func tCase(name string) testFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
		s, err := e.str(in)
		if err != nil {
			return false, err
		}
		if name == "lower" {
			return pyIsLower(s), nil
		}
		return pyIsUpper(s), nil
	}
}

func tSameas(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	p, err := bind("sameas", a, kw, "other")
	if err != nil {
		return false, err
	}
	return sameAs(in, p[0]), nil
}

func tIn(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	p, err := bind("in", a, kw, "seq")
	if err != nil {
		return false, err
	}
	if p[0] == noArg {
		return false, errors.New("test_in() missing 1 required positional argument: 'seq'")
	}
	return e.containsItem(p[0], in)
}

func isInteger(v any) bool {
	switch v.(type) {
	case int64, *big.Int, int:
		return true
	}
	return false
}

func isSequence(v any) bool {
	switch v.(type) {
	case string, *tainted, Markup, *List, []any, []string, []map[string]any, Tuple, *rangeVal,
		*Dict, map[string]any, map[string]string, *record.Record, *group:
		return true
	case *Undefined:
		return true
	}
	return false
}

func isIterable(v any) bool {
	switch v.(type) {
	case string, *tainted, Markup, *List, []any, []string, []map[string]any, Tuple, *rangeVal,
		*Dict, map[string]any, map[string]string, *record.Record, *generator, *dictView, *Undefined, *group:
		return true
	}
	return false
}

func isCallable(v any) bool {
	switch v.(type) {
	case *Macro, *builtin, *boundMethod, *joiner, *blockRef:
		return true
	case *loopCtx:
		return true
	}
	return false
}

// predicate is the test that pred is.
func predicate(pred func(any) bool) testFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
		if len(a) > 0 || len(kw) > 0 {
			return false, fmt.Errorf("the test takes no arguments, %d given", len(a)+len(kw))
		}
		return pred(in), nil
	}
}

func cmpTest(op string) testFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
		if len(a) != 1 || len(kw) > 0 {
			return false, fmt.Errorf("the %s test takes exactly one argument (%d given)", op, len(a)+len(kw))
		}
		return e.compareOp(op, in, a[0])
	}
}

func tModulo(name string) testFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
		if len(a) > 0 {
			return false, fmt.Errorf("test_%s() takes 1 positional argument but %d were given", name, len(a)+1)
		}
		m, err := e.arith("%", in, int64(2))
		if err != nil {
			return false, err
		}
		if name == "odd" {
			return equal(m, int64(1)), nil
		}
		return equal(m, int64(0)), nil
	}
}

func tDivisibleby(e *evaluator, in any, a []any, kw map[string]any) (bool, error) {
	p, err := bind("divisibleby", a, kw, "num")
	if err != nil {
		return false, err
	}
	if p[0] == noArg {
		return false, errors.New("test_divisibleby() missing 1 required positional argument: 'num'")
	}
	m, err := e.arith("%", in, p[0])
	if err != nil {
		return false, err
	}
	return equal(m, int64(0)), nil
}

// sameAs approximates Python's `is`: None, bools and small ints are singletons; other values
// are the same when they are the same object.
func sameAs(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y && x >= -5 && x <= 256
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *List, *Dict, *Namespace, *Macro, *loopCtx, *record.Record, *Undefined, *generator:
		return a == b
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	return false
}
