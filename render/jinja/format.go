package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// What Python's two string formattings share: "fmt" % args (format_percent.go) and
// "fmt".format(...) (format_str.go) print floats and ascii() alike.

// formatFloatSpec formats a non-negative float for %e %f %g (and format()'s e f g).
func formatFloatSpec(f float64, conv byte, prec int, alt bool) string {
	upper := conv == 'E' || conv == 'F' || conv == 'G'
	switch {
	case math.IsInf(f, 0):
		if upper {
			return "INF"
		}
		return "inf"
	case math.IsNaN(f):
		if upper {
			return "NAN"
		}
		return "nan"
	}
	var s string
	switch conv {
	case 'e', 'E':
		s = strconv.FormatFloat(f, 'e', prec, 64)
	case 'f', 'F':
		s = strconv.FormatFloat(f, 'f', prec, 64)
	case 'g', 'G':
		if prec == 0 {
			prec = 1
		}
		exp := 0
		if f != 0 {
			d := strconv.FormatFloat(f, 'e', prec-1, 64)
			exp, _ = strconv.Atoi(d[strings.IndexByte(d, 'e')+1:])
		}
		if exp < -4 || exp >= prec {
			s = strconv.FormatFloat(f, 'e', prec-1, 64)
			if !alt {
				m, ex, _ := strings.Cut(s, "e")
				if strings.Contains(m, ".") {
					m = strings.TrimRight(strings.TrimRight(m, "0"), ".")
				}
				s = m + "e" + ex
			}
		} else {
			s = strconv.FormatFloat(f, 'f', max(prec-1-exp, 0), 64)
			if !alt && strings.Contains(s, ".") {
				s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			}
		}
	}
	if alt && !strings.Contains(s, ".") {
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			s = s[:i] + "." + s[i:]
		} else {
			s += "."
		}
	}
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

// asciiEscape turns a repr into Python's ascii(): non-ASCII characters escaped.
func asciiEscape(r string) string {
	var b strings.Builder
	for _, c := range r {
		switch {
		case c < 0x80:
			b.WriteRune(c)
		case c <= 0xff:
			fmt.Fprintf(&b, "\\x%02x", c)
		case c <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			fmt.Fprintf(&b, "\\U%08x", c)
		}
	}
	return b.String()
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }
