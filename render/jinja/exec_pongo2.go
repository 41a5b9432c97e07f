package jinja

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// pongo2's own tags: cycle, firstof, ifchanged, widthratio, spaceless.

func (e *evaluator) execCycle(s *cycleStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, ok := lv.(*loopCtx)
	if !ok || len(s.values) == 0 {
		return e.at(s.pos, errors.New("{% cycle %} needs values and a loop"))
	}
	v, err := e.eval(s.values[loop.index0%len(s.values)], f)
	if err != nil {
		return err
	}
	if s.as != "" {
		f.set(s.as, v)
		if s.silent {
			return nil
		}
	}
	if e.suppress {
		return nil
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execFirstof(s *firstofStmt, f *frame) error {
	for _, x := range s.values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		if truthy(v) {
			if e.suppress {
				return nil
			}
			return e.at(s.pos, e.print(v))
		}
	}
	return nil
}

func (e *evaluator) execIfchanged(s *ifchangedStmt, f *frame) error {
	lv, _ := e.lookup(f, "loop")
	loop, _ := lv.(*loopCtx)
	if loop == nil {
		return e.at(s.pos, errors.New("{% ifchanged %} outside a loop"))
	}
	var key, out string
	if len(s.values) > 0 {
		for _, x := range s.values {
			v, err := e.eval(x, f)
			if err != nil {
				return err
			}
			r, err := repr(v)
			if err != nil {
				return e.at(s.pos, err)
			}
			key += r + "\x00"
		}
	} else {
		var err error
		if out, err = e.capture(s.body, f); err != nil {
			return err
		}
		key = out
	}
	if loop.ifchanged == nil {
		loop.ifchanged = map[*ifchangedStmt]string{}
	}
	last, seen := loop.ifchanged[s]
	if seen && last == key {
		return e.execAll(s.els, f)
	}
	loop.ifchanged[s] = key
	if len(s.values) > 0 {
		return e.execAll(s.body, f)
	}
	return e.at(s.pos, e.write(out))
}

func (e *evaluator) execWidthratio(s *widthratioStmt, f *frame) error {
	var xs [3]float64
	for i, x := range []expr{s.value, s.max, s.size} {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		n := toNum(v)
		if n.kind == 0 {
			return e.at(s.pos, fmt.Errorf("{%% widthratio %%} needs numbers, not %s", aTypeName(v)))
		}
		if xs[i], err = n.float(); err != nil {
			return e.at(s.pos, err)
		}
	}
	r := math.Ceil(xs[0]/xs[1]*xs[2] + 0.5)
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return e.at(s.pos, errors.New("{% widthratio %}: division by zero"))
	}
	if e.suppress {
		return nil
	}
	return e.at(s.pos, e.write(strconv.Itoa(int(r))))
}

var spacelessRE = regexp.MustCompile(`(?U:(<.*>))([\t\n\v\f\r ]+)(?U:(<.*>))`)

func (e *evaluator) execSpaceless(s *spacelessStmt, f *frame) error {
	out, err := e.capture(s.body, f)
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
	return e.at(s.pos, e.write(out))
}
