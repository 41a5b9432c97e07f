package parse

import (
	"fmt"
	"strconv"
	"strings"
)

// sexpr writes a tree as an S-expression, so that a test can say which tree a template is:
// (op a b) for operators, (|name in args) for a filter, (is name in args) for a test.
func sexpr(n any) string {
	var b strings.Builder
	writeNode(&b, n)
	return b.String()
}

func writeNode(b *strings.Builder, n any) {
	w := func(format string, parts ...any) {
		for i, p := range parts {
			if _, ok := p.(string); !ok {
				parts[i] = sexpr(p)
			}
		}
		fmt.Fprintf(b, format, parts...)
	}
	switch x := n.(type) {
	case nil:
		b.WriteString("_")
	case Expr:
		writeExpr(b, x, w)
	case []Stmt:
		for i, s := range x {
			if i > 0 {
				b.WriteString(" ")
			}
			writeNode(b, s)
		}
	case Stmt:
		writeStmt(b, x, w)
	case Args:
		writeArgs(b, x)
	default:
		fmt.Fprintf(b, "<%T>", x)
	}
}

func writeExpr(b *strings.Builder, x Expr, w func(string, ...any)) {
	switch x := x.(type) {
	case *ConstExpr:
		b.WriteString(literal(x.Value))
	case *NameExpr:
		b.WriteString(x.Name)
	case *AttrExpr:
		w("(. %s %s)", x.Obj, x.Name)
	case *ItemExpr:
		w("([] %s %s)", x.Obj, x.Key)
	case *SliceExpr:
		w("([:] %s %s %s %s)", x.Obj, x.Lo, x.Hi, x.Step)
	case *CallExpr:
		w("(call %s%s)", x.Fn, x.Args)
	case *FilterExpr:
		name := x.Name
		if x.Pongo2 {
			name += ":"
		}
		w("(|%s %s%s)", name, x.In, x.Args)
	case *TestExpr:
		name := x.Name
		if x.Negate {
			name = "not " + name
		}
		w("(is %s %s%s)", name, x.In, x.Args)
	case *BinExpr:
		w("(%s %s %s)", x.Op, x.A, x.B)
	case *ConcatExpr:
		b.WriteString("(~")
		for _, it := range x.Items {
			w(" %s", it)
		}
		b.WriteString(")")
	case *CompareExpr:
		w("(cmp %s", x.First)
		for _, op := range x.Ops {
			w(" %s %s", op.Op, op.X)
		}
		b.WriteString(")")
	case *AndExpr:
		w("(and %s %s)", x.A, x.B)
	case *OrExpr:
		w("(or %s %s)", x.A, x.B)
	case *NotExpr:
		w("(not %s)", x.X)
	case *NegExpr:
		op := "+"
		if x.Neg {
			op = "-"
		}
		w("("+op+" %s)", x.X)
	case *CondExpr:
		w("(if %s %s %s)", x.Test, x.Then, x.Else)
	case *ListExpr:
		writeItems(b, "[", x.Items, "]")
	case *TupleExpr:
		writeItems(b, "(tuple", x.Items, ")")
	case *DictExpr:
		b.WriteString("{")
		for i := range x.Keys {
			if i > 0 {
				b.WriteString(" ")
			}
			w("%s: %s", x.Keys[i], x.Values[i])
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "<%T>", x)
	}
}

func writeItems(b *strings.Builder, open string, items []Expr, close string) {
	b.WriteString(open)
	for i, it := range items {
		if i > 0 || open != "[" {
			b.WriteString(" ")
		}
		writeNode(b, it)
	}
	b.WriteString(close)
}

// writeArgs writes a call's, filter's or test's arguments, each after a space.
func writeArgs(b *strings.Builder, a Args) {
	for _, x := range a.List {
		b.WriteString(" " + sexpr(x))
	}
	if a.Star != nil {
		b.WriteString(" *" + sexpr(a.Star))
	}
	for _, kw := range a.Kw {
		b.WriteString(" " + kw.Name + "=" + sexpr(kw.X))
	}
	if a.StarKw != nil {
		b.WriteString(" **" + sexpr(a.StarKw))
	}
}

func writeStmt(b *strings.Builder, s Stmt, w func(string, ...any)) {
	switch s := s.(type) {
	case *TextStmt:
		b.WriteString(strconv.Quote(s.Text))
	case *PrintStmt:
		w("{{%s}}", s.X)
	case *IfStmt:
		b.WriteString("(if")
		for i, c := range s.Conds {
			w(" %s [%s]", c, s.Bodies[i])
		}
		if s.Else != nil {
			w(" else [%s]", s.Else)
		}
		b.WriteString(")")
	case *ForStmt:
		w("(for %s %s %s [%s]", target(s.Target), s.Iter, s.Filter, s.Body)
		if s.Else != nil {
			w(" else [%s]", s.Else)
		}
		b.WriteString(")")
	case *SetStmt:
		w("(set %s %s)", target(s.Target), s.X)
	case *MacroStmt:
		w("(macro %s(%s) [%s])", s.Macro.Name, strings.Join(s.Macro.Params, " "), s.Macro.Body)
	case *BlockStmt:
		w("(block %s [%s])", s.Name, s.Body)
	default:
		fmt.Fprintf(b, "<%T>", s)
	}
}

func target(t Target) string {
	switch {
	case t.Tuple:
		var parts []string
		for _, it := range t.Items {
			parts = append(parts, target(it))
		}
		return "(" + strings.Join(parts, " ") + ")"
	case t.Attr != "":
		return t.Name + "." + t.Attr
	}
	return t.Name
}

func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case string:
		return "'" + v + "'"
	}
	return fmt.Sprint(v)
}
