package candidate

import (
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

func TestTestsOf(t *testing.T) {
	tests, err := testsOf(map[string]string{"template": "x", "tests.b.yaml": "expect:\n- contains: backend\n", "tests.a.yaml": "expect:\n- valid: true\n"})
	if err != nil || len(tests) != 2 || tests[0].Name != "a" || tests[1].Key != "tests.b.yaml" || tests[1].Expect[0].Contains != "backend" {
		t.Fatalf("%+v, %v", tests, err)
	}
	for src, want := range map[string]string{
		"expect:\n- contain: backend\n": `unknown field "contain"`,
		"objects: []\n":                 "expects nothing",
		"expect: [\n":                   `key "tests.x.yaml"`,
	} {
		if _, err := testsOf(map[string]string{"tests.x.yaml": src}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

func TestMapEntry(t *testing.T) {
	m := "# comment\nweb.localhost be_web\napi.localhost   be_api\n"
	if v, ok := mapEntry(m, "api.localhost"); !ok || v != "be_api" {
		t.Errorf("%q %v", v, ok)
	}
	if _, ok := mapEntry(m, "nope"); ok {
		t.Error("found an entry that is not there")
	}
}

func TestFileOf(t *testing.T) {
	b := &render.Bundle{Config: []byte("cfg"), Maps: map[string][]byte{"hosts.map": []byte("m")}, Files: map[string][]byte{"503.http": []byte("f")}}
	for name, want := range map[string]string{"haproxy.cfg": "cfg", "maps/hosts.map": "m", "files/503.http": "f"} {
		if got, err := fileOf(b, name); err != nil || got != want {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	if _, err := fileOf(b, "maps/nope"); err == nil {
		t.Error("a file the rendering does not have")
	}
}
