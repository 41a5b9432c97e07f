package jinja

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// pongo2's own tags: cycle, firstof, ifchanged, widthratio, spaceless.

func (e *evaluator) execCycle(s *parse.CycleStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, ok := lv.(*loopCtx)
	if !ok || len(s.Values) == 0 {
		return e.at(s.Pos, errors.New("{% cycle %} needs values and a loop"))
	}
	v, err := e.eval(s.Values[loop.index0%len(s.Values)], f)
	if err != nil {
		return err
	}
	if s.As != "" {
		f.set(s.As, v)
		if s.Silent {
			return nil
		}
	}
	if e.suppress {
		return nil
	}
	return e.at(s.Pos, e.print(v))
}

func (e *evaluator) execFirstof(s *parse.FirstofStmt, f *frame) error {
	for _, x := range s.Values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		if truthy(v) {
			if e.suppress {
				return nil
			}
			return e.at(s.Pos, e.print(v))
		}
	}
	return nil
}

func (e *evaluator) execIfchanged(s *parse.IfchangedStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, _ := lv.(*loopCtx)
	if loop == nil {
		return e.at(s.Pos, errors.New("{% ifchanged %} outside a loop"))
	}
	var key, out string
	var secret bool
	if len(s.Values) > 0 {
		for _, x := range s.Values {
			v, err := e.eval(x, f)
			if err != nil {
				return err
			}
			r, err := repr(v)
			if err != nil {
				return e.at(s.Pos, err)
			}
			key += r + "\x00"
		}
	} else {
		var err error
		if out, secret, err = e.capture(s.Body, f); err != nil {
			return err
		}
		key = out
	}
	if loop.ifchanged == nil {
		loop.ifchanged = map[*parse.IfchangedStmt]string{}
	}
	last, seen := loop.ifchanged[s]
	if seen && last == key {
		return e.execAll(s.Else, f)
	}
	loop.ifchanged[s] = key
	if len(s.Values) > 0 {
		return e.execAll(s.Body, f)
	}
	return e.at(s.Pos, e.writeText(out, secret))
}

func (e *evaluator) execWidthratio(s *parse.WidthratioStmt, f *frame) error {
	var xs [3]float64
	for i, x := range []parse.Expr{s.Value, s.Max, s.Size} {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		n := toNum(v)
		if n.kind == 0 {
			return e.at(s.Pos, fmt.Errorf("{%% widthratio %%} needs numbers, not %s", aTypeName(v)))
		}
		if xs[i], err = n.float(); err != nil {
			return e.at(s.Pos, err)
		}
	}
	r := math.Ceil(xs[0]/xs[1]*xs[2] + 0.5)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return e.at(s.Pos, errors.New("{% widthratio %}: division by zero"))
	}
	if e.suppress {
		return nil
	}
	return e.at(s.Pos, e.write(strconv.Itoa(int(r))))
}

var spacelessRE = regexp.MustCompile(`(?U:(<.*>))([\t\n\v\f\r ]+)(?U:(<.*>))`)

func (e *evaluator) execSpaceless(s *parse.SpacelessStmt, f *frame) error {
	out, secret, err := e.capture(s.Body, f)
	if err != nil {
		return err
	}
	for {
		next := spacelessRE.ReplaceAllString(out, "$1$3")
		if next == out {
			break
		}
		out = next
	}
	if e.suppress {
		return nil
	}
	return e.at(s.Pos, e.writeText(out, secret))
}
