package sidecar

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
)

// secretPassword is the stats password of these tests; its transformations are what a
// template may print of it.
const secretPassword = "Pw-9f3c1e77d2-Secret"

// secretTransforms are template expressions that derive text from the stats password, and
// what each prints.
var secretTransforms = []struct{ expr, printed string }{
	{"stats.password|reverse", reverse(secretPassword)},
	{"stats.password[:10]", secretPassword[:10]},
	{"stats.password.replace('-', '_')", strings.ReplaceAll(secretPassword, "-", "_")},
	{"stats.password|upper", strings.ToUpper(secretPassword)},
	{"'x' ~ stats.password ~ 'y'", "x" + secretPassword + "y"},
	{"'%s_%s'|format(stats.password|lower, 1)", strings.ToLower(secretPassword) + "_1"},
	{"'<{}>'.format(stats.password[3:]|reverse)", "<" + reverse(secretPassword[3:]) + ">"},
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// TestValidateNeverQuotesATransformedSecret: haproxy -c rejects a line the template wrote from
// the stats password, transformed: validate's error names the rendered line and the template
// line that wrote it, and quotes neither that line nor HAProxy's words about it.
func TestValidateNeverQuotesATransformedSecret(t *testing.T) {
	needHAProxy(t)
	for _, tc := range secretTransforms {
		t.Run(tc.expr, func(t *testing.T) {
			dir := example(t)
			edit(t, filepath.Join(dir, "config.yaml"), "      stats uri /\n", "      stats uri /\n      {{ "+tc.expr+" }} on\n")
			_, err := runOnce(t, "validate", "--dir", dir, "--statistics-password", secretPassword)
			if err == nil {
				t.Fatal("validate passed")
			}
			msg := err.Error()
			for _, leak := range []string{tc.printed, secretPassword, strings.ToLower(tc.printed)} {
				if strings.Contains(msg, leak) {
					t.Errorf("the error quotes %q:\n%s", leak, msg)
				}
			}
			for _, want := range []string{"(rendered line 26, from template \"template\" line 26: " + content.Withheld + ")", content.WithheldWords} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q:\n%s", want, msg)
				}
			}
		})
	}
}

// TestRejectionNamesTheTemplateLine: a haproxy -c rejection of a line without a secret quotes
// it, with the template line that wrote it.
func TestRejectionNamesTheTemplateLine(t *testing.T) {
	needHAProxy(t)
	dir := example(t)
	edit(t, filepath.Join(dir, "config.yaml"), "      balance roundrobin\n", "      balance roundrobin\n      bogus-keyword {{ service.name }}\n")
	_, err := runOnce(t, "validate", "--dir", dir)
	if err == nil {
		t.Fatal("validate passed")
	}
	if want := `from template "template" line 67: "bogus-keyword api")`; !strings.Contains(err.Error(), want) {
		t.Errorf("the error does not say %q:\n%v", want, err)
	}
}
