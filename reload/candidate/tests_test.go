package candidate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

func TestTestsOf(t *testing.T) {
	ref := func(key string) snapshot.Ref {
		return snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config", Key: key}
	}
	tests, err := testsOf(map[string]string{"template": "x", "tests.b.yaml": "expect:\n- contains: backend\n", "tests.a.yaml": "expect:\n- valid: true\n"}, ref)
	if err != nil || len(tests) != 2 || tests[0].Name != "a" || tests[1].Key != "tests.b.yaml" || tests[1].Expect[0].Contains != "backend" {
		t.Fatalf("%+v, %v", tests, err)
	}
	for src, want := range map[string]string{
		"expect:\n- contain: backend\n":      `key "tests.x.yaml": json: unknown field "contain"`,
		"objects: []\n":                      "expects nothing",
		"expect:\n- contains: x\n  - y: z\n": `key "tests.x.yaml" line 2: yaml: line 2: `,
	} {
		if _, err := testsOf(map[string]string{"tests.x.yaml": src}, ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

// TestTestLines: a failing test names the line of the assertion that failed, or of its
// objects, inside its key.
func TestTestLines(t *testing.T) {
	text := "# routes\nobjects:\n- kind: Pod\nexpect:\n- contains: a\n\n- matches: b\n- valid: true\n"
	tests, err := testsOf(map[string]string{"tests.t.yaml": text}, func(key string) snapshot.Ref { return snapshot.Ref{Key: key} })
	if err != nil || len(tests) != 1 {
		t.Fatalf("%+v, %v", tests, err)
	}
	for _, tc := range []struct {
		err  error
		line int
	}{
		{&testPart{expect: -1, err: errors.New("x")}, 2},
		{&testPart{expect: 0, err: errors.New("x")}, 5},
		{&testPart{expect: 1, err: errors.New("x")}, 7},
		{fmt.Errorf("wrapped: %w", &testPart{expect: 2, err: errors.New("x")}), 8},
		{errors.New("render failed"), 0},
	} {
		if got := tests[0].line(tc.err); got != tc.line {
			t.Errorf("%v: line %d, want %d", tc.err, got, tc.line)
		}
	}
}

func TestMapEntry(t *testing.T) {
	m := "# comment\nweb.localhost be_web\napi.localhost   be_api\n"
	if v, _, ok := mapEntry(m, "api.localhost"); !ok || v != "be_api" {
		t.Errorf("%q %v", v, ok)
	}
	if _, _, ok := mapEntry(m, "nope"); ok {
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
