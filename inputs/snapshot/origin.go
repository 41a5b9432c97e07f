package snapshot

import (
	"errors"
	"fmt"
)

// Position is a place in a file, as compilers print it and editors and CI annotators read it:
// "FILE:LINE:COL".
type Position struct {
	File string
	Line int // 1-based; 0: the file as a whole
	Col  int // 1-based, in characters; 0: the line as a whole
}

func (p Position) String() string {
	switch {
	case p.Line <= 0:
		return p.File
	case p.Col <= 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Style says how the lines of a key's value map onto the lines of its file.
type Style uint8

const (
	// Whole: only where the value starts is known (a quoted, plain or flow scalar, base64
	// data, JSON): a line inside the value is not a line of the file.
	Whole Style = iota
	// Literal: a literal block scalar (key: |): line N of the value is line N-1 after the
	// first, indented as the first.
	Literal
	// Folded: a folded block scalar (key: >): lines of the file were joined; Origin keeps
	// where each one starts in the value.
	Folded
)

// Origin is where an object, or the value of one key of its data, is written in a manifest
// file. Only the file source knows it (kube and etcd objects have no file).
type Origin struct {
	// Position is where the object starts, or the value: for a block scalar, the start of
	// its first line of content (Col is past the indentation); else its first character.
	Position
	Style Style
	// folds are, for a Folded value, where each line of the file starts in the value (the
	// first is Position's line); an empty line of the file has Line 0.
	folds []ValuePos
}

// ValuePos is a line and column inside a value.
type ValuePos struct{ Line, Col int32 }

// NewFolded is the Origin of a folded block scalar whose content starts at pos; starts are
// where each of its lines of the file starts in the value (Line 0: an empty line).
func NewFolded(pos Position, starts []ValuePos) Origin {
	return Origin{Position: pos, Style: Folded, folds: starts}
}

// At is where line and col of the value are in the file (line 0: where the value starts; col
// 0: the line as a whole).
func (o Origin) At(line, col int) Position {
	p := o.Position
	if line <= 0 {
		return p
	}
	switch o.Style {
	case Literal:
		p.Line += line - 1
		if col > 0 {
			p.Col += col - 1
		} else {
			p.Col = 0
		}
	case Folded:
		// The last line of the file that starts at or before (line, col) of the value.
		found := -1
		for i, s := range o.folds {
			if s.Line == 0 {
				continue
			}
			if int(s.Line) < line || (int(s.Line) == line && (col <= 0 || int(s.Col) <= col)) {
				found = i
				if col <= 0 && int(s.Line) == line {
					break
				}
			}
		}
		if found < 0 {
			return p
		}
		s := o.folds[found]
		p.Line += found
		switch {
		case col <= 0:
			p.Col = 0
		case int(s.Line) == line:
			p.Col += col - int(s.Col)
		default:
			p.Col = 0 // past the end of the file's line: a newline the folding kept
		}
	}
	return p
}

// Origins are where the objects of a source (Ref with no Key) and the values of their data keys
// are written, for the ConfigMaps and Secrets of the file source; nil for the other sources.
// Read-only once made.
type Origins map[Ref]Origin

// At is where line and col of ref's value are in its file (see Origin.At): the value's own
// position, else its object's (a key whose value has no known origin); false when neither is
// known.
func (o Origins) At(ref Ref, line, col int) (Position, bool) {
	if og, ok := o[ref]; ok {
		return og.At(line, col), true
	}
	if ref.Key != "" {
		obj := ref
		obj.Key = ""
		if og, ok := o[obj]; ok {
			return og.Position, true
		}
	}
	return Position{}, false
}

// Located is an error with where it is written in front, "FILE:LINE:COL: error", as
// compilers print errors, so that editors and CI annotators place it.
type Located struct {
	At  Position
	Err error
}

func (e *Located) Error() string { return e.At.String() + ": " + e.Err.Error() }
func (e *Located) Unwrap() error { return e.Err }

// Unlocated is err without the position Locate put in front: what tells whether an error is a
// new one (an edit elsewhere in the file moves the lines of one that is not).
func Unlocated(err error) error {
	if l, ok := err.(*Located); ok {
		return l.Err
	}
	return err
}

// Locate is err with where its bad input is written in front (a *Located), when err is an
// *InputError (or wraps one) whose object has a known origin: the line and column it gives,
// else where the key's value starts. Other errors are returned as they are; a joined error is
// located error by error. A Located err is located afresh (the file may have moved its lines
// since), or kept when its object has no known origin now.
func (o Origins) Locate(err error) error {
	return o.locate(err, Ref{}, false)
}

// LocateAt is Locate for the error of an input held back (ref): located at the line err gives
// when err is about ref itself or a key of it (ref a whole object: the template set), else
// where ref's value starts (err then shows where the failure was seen: a template line a
// service's value broke).
func (o Origins) LocateAt(ref Ref, err error) error {
	return o.locate(err, ref, true)
}

func (o Origins) locate(err error, ref Ref, byRef bool) error {
	if err == nil {
		return nil
	}
	inner := err
	if l, ok := err.(*Located); ok {
		inner = l.Err
	}
	if j, ok := inner.(interface{ Unwrap() []error }); ok && inner == err {
		errs := j.Unwrap()
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = o.locate(e, ref, byRef)
		}
		return errors.Join(out...)
	}
	var ie *InputError
	hasIE := errors.As(inner, &ie)
	line, col := 0, 0
	switch {
	case byRef && hasIE && (ie.Ref == ref || ref.Key == "" && ie.Ref.Kind == ref.Kind && ie.Ref.Namespace == ref.Namespace && ie.Ref.Name == ref.Name):
		ref, line, col = ie.Ref, ie.Line, ie.Col
	case byRef:
	case hasIE:
		ref, line, col = ie.Ref, ie.Line, ie.Col
	default:
		return err
	}
	at, ok := o.At(ref, line, col)
	if !ok {
		return err // not known now: as it was (located or not)
	}
	return &Located{At: at, Err: inner}
}
