package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLocate: an error about input read from a file starts with where it is written,
// FILE:LINE:COL, and still names the object, key and line inside the key.
func TestLocate(t *testing.T) {
	services := Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services"}
	web := services
	web.Key = "web"
	api := services
	api.Key = "api"
	template := Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config", Key: "template"}
	origins := Origins{
		services: {Position: Position{File: "lb/services.yaml", Line: 5}},
		web:      {Position: Position{File: "lb/services.yaml", Line: 10, Col: 5}, Style: Literal},
		template: {Position: Position{File: "lb/config.yaml", Line: 8, Col: 5}, Style: Literal},
	}
	bad := func(ref Ref, line, col int) *InputError {
		return &InputError{Stage: StageDecode, Ref: ref, Line: line, Col: col, Err: errors.New("invalid JSON")}
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"a line inside a literal block", bad(web, 4, 3),
			`lb/services.yaml:13:7: decode: ConfigMap lb/services key "web" line 4 column 3: invalid JSON`},
		{"no line: where the value starts", bad(web, 0, 0),
			`lb/services.yaml:10:5: decode: ConfigMap lb/services key "web": invalid JSON`},
		{"a line and no column", bad(web, 2, 0), `lb/services.yaml:11: decode`},
		{"a key whose value's origin is unknown: its object", bad(api, 3, 1), `lb/services.yaml:5: decode: ConfigMap lb/services key "api" line 3`},
		{"wrapped", fmt.Errorf("while trying: %w", bad(web, 1, 1)), `lb/services.yaml:10:5: while trying: decode`},
		{"an object no file holds: as it is", bad(Ref{Kind: "Secret", Name: "x"}, 1, 1), `decode: Secret x line 1 column 1: invalid JSON`},
		{"not bad input: as it is", errors.New("connection refused"), "connection refused"},
		{"located already: located afresh", &Located{At: Position{File: "old.yaml", Line: 1}, Err: bad(web, 1, 1)}, `lb/services.yaml:10:5: decode`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := origins.Locate(tc.err).Error(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %q\nwant %q...", got, tc.want)
			}
			if !errors.Is(origins.Locate(tc.err), tc.err) && !errors.As(tc.err, new(*Located)) {
				t.Error("the located error does not wrap the error")
			}
		})
	}

	t.Run("joined: error by error", func(t *testing.T) {
		got := origins.Locate(errors.Join(bad(web, 1, 1), bad(template, 3, 2))).Error()
		lines := strings.Split(got, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "lb/services.yaml:10:5: ") || !strings.HasPrefix(lines[1], "lb/config.yaml:10:6: ") {
			t.Errorf("%q", got)
		}
	})
	t.Run("without origins (kube, etcd): as it is", func(t *testing.T) {
		err := bad(web, 1, 1)
		if got := Origins(nil).Locate(err); got != err {
			t.Errorf("%v", got)
		}
	})
	t.Run("a hold: at the input held", func(t *testing.T) {
		// A service's value breaks the template: the hold is the service's, the error the
		// template's line.
		shown := &InputError{Stage: StageRender, Ref: template, Line: 3, Col: 2, Err: errors.New("boom")}
		got := origins.LocateAt(web, fmt.Errorf("%s is held back: %w", web, shown)).Error()
		if !strings.HasPrefix(got, `lb/services.yaml:10:5: ConfigMap lb/services key "web" is held back: render: ConfigMap lb/config key "template" line 3 column 2`) {
			t.Errorf("%q", got)
		}
		if got := origins.LocateAt(web, bad(web, 2, 3)).Error(); !strings.HasPrefix(got, "lb/services.yaml:11:7: ") {
			t.Errorf("its own line: %q", got)
		}
		// The template set is held as its object; the error is in one of its keys.
		set := template
		set.Key = ""
		got = origins.LocateAt(set, fmt.Errorf("%s is held back: %w", set, shown)).Error()
		if !strings.HasPrefix(got, "lb/config.yaml:10:6: ConfigMap lb/config is held back") {
			t.Errorf("a key of the object held: %q", got)
		}
	})
}

// TestFoldedOrigin: a line and column of a folded value is found on the line of the file it
// came from.
func TestFoldedOrigin(t *testing.T) {
	// The file's lines (at line 20, indented by 4): "a b" / "c" / "" / "d", folded to "a b c\nd".
	o := NewFolded(Position{File: "f.yaml", Line: 20, Col: 5}, []ValuePos{{1, 1}, {1, 5}, {0, 0}, {2, 1}})
	cases := []struct {
		line, col int
		want      string
	}{
		{1, 1, "f.yaml:20:5"},
		{1, 3, "f.yaml:20:7"},
		{1, 5, "f.yaml:21:5"},
		{2, 1, "f.yaml:23:5"},
		{2, 0, "f.yaml:23"},
		{0, 0, "f.yaml:20:5"},
	}
	for _, tc := range cases {
		if got := o.At(tc.line, tc.col).String(); got != tc.want {
			t.Errorf("line %d column %d: %s, want %s", tc.line, tc.col, got, tc.want)
		}
	}
}
