package content

import "testing"

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
