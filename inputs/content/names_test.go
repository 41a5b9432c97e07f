package content

import (
	"strings"
	"testing"
)

// The names every former copy of the rule refused, and the names certificates really have.
func TestCheckCertName(t *testing.T) {
	for _, name := range []string{"", ".", "..", ".hidden", "../x", "a/b", `a\b`, "a\x00b", "a\nb", "a\rb", "a..b", "my key", "é"} {
		if CheckCertName(name) == nil {
			t.Errorf("certificate name %q accepted", name)
		}
	}
	for _, name := range []string{"site", "example.com", "wild_card-1", "lb.web-tls", "x.y.z"} {
		if err := CheckCertName(name); err != nil {
			t.Errorf("certificate name %q refused: %v", name, err)
		}
	}
}

func TestCheckFileName(t *testing.T) {
	for _, good := range []string{"hosts.map", "a", "503.http", "cors-v2_1.lua", "A-Z"} {
		if err := CheckFileName(good); err != nil {
			t.Errorf("%q rejected: %v", good, err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", "../x", "a.b.c", "a b", "a\nb", "a\x00", "é.map", "a.", strings.Repeat("x", maxFileName+1)} {
		if err := CheckFileName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
