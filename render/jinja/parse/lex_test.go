package parse

import (
	"math/big"
	"testing"
)

// TestWhitespaceControl: {%- -%}, {{- -}} and {#- -#} strip the whitespace beside them
// (newlines included); {%+ keeps it; one trailing newline of the template is dropped.
func TestWhitespaceControl(t *testing.T) {
	wantTrees(t, map[string]string{
		"a  \n {%- if x -%} \n b {%- endif %}\n": `"a" (if x ["b"])`,
		"a {{- x -}} b":                          `"a" {{x}} "b"`,
		"a {#- note -#}\n b":                     `"a" "b"`,
		"a {%+ if x %}{% endif %}":               `"a " (if x [])`,
		"a\n{# c #}\nb\n\n":                      `"a\n" "\nb\n"`,
		"{% raw -%}  {{ x }}  {%- endraw %}":     `"{{ x }}"`,
	})
}

// TestLiterals: numbers and strings are Python's: 0x 0o 0b, _ separators, ints beyond 64
// bits, floats with exponents, and a string's escapes.
func TestLiterals(t *testing.T) {
	huge, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	for src, want := range map[string]any{
		"0x1F":                           int64(31),
		"0o17":                           int64(15),
		"0b101":                          int64(5),
		"1_000":                          int64(1000),
		"123456789012345678901234567890": huge,
		"1.5e3":                          1500.0,
		"1e-2":                           0.01,
		"1_0.2_5":                        10.25,
		`'a\x41\u00e9\n\'"'`:             "aAé\n'\"",
		`"tab\there\\"`:                  "tab\there\\",
		`'\q'`:                           `\q`,
		`'\101'`:                         "A",
	} {
		tr := parsed(t, "{{ "+src+" }}")
		if tr == nil {
			continue
		}
		got := tr.Body[0].(*PrintStmt).X.(*ConstExpr).Value
		if b, ok := want.(*big.Int); ok {
			if g, ok := got.(*big.Int); !ok || g.Cmp(b) != 0 {
				t.Errorf("%s: %v (%T), want %v", src, got, got, want)
			}
			continue
		}
		if got != want {
			t.Errorf("%s: %#v, want %#v", src, got, want)
		}
	}
}

// TestLexErrors: what the lexer says, at the line and column of the trouble.
func TestLexErrors(t *testing.T) {
	wantErrors(t, map[string]string{
		"{{ 012 }}":        `line 1 column 4: bad number "012": leading zeros are not allowed (write 0o12 for octal)`,
		"{{ 0x }}":         `line 1 column 4: bad number "0x"`,
		"{{ 'abc }}":       "line 1 column 4: this string is never closed",
		`{{ '\N{DASH}' }}`: `line 1 column 5: \N{...} escapes (Unicode character names) are not supported in strings`,
		`{{ '\u12' }}`:     `line 1 column 5: truncated \u escape in a string`,
		"{{ x ) }}":        `line 1 column 6: unbalanced ")": there is no opening bracket for it`,
		"{{ (x] }}":        `line 1 column 6: unbalanced "]": expected ')'`,
		"{{ x $ }}":        `line 1 column 6: unexpected character '$' inside a tag`,
	})
}
