package render

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

func TestRenderDeterministic(t *testing.T) {
	// Maps with many keys: Go randomizes their iteration order on every range.
	big := map[string]any{}
	for i := 0; i < 40; i++ {
		n := (i * 17) % 40 // insert in a scrambled order
		big[fmt.Sprintf("pod-%02d", n)] = pod(fmt.Sprintf("pod-%02d", n), fmt.Sprintf("10.0.0.%d", n))
	}
	tpl := `{% for name, p in services[0].pods.items() %}{{ name }} {% endfor %}
{% for name in services[0].pods %}{{ name }} {% endfor %}
{% for p in services[0].pods.values() %}{{ p.status.podIP }} {% endfor %}
{% for k, v in services[0].pods %}{{ k }} {% endfor %}
{{ services[0].pods.keys()|list|join(",") }}
{{ services[0].selector }}`
	snap := func() *snapshot.Snapshot {
		s := testSnapshot(map[string]string{"template": tpl}, "template")
		s.Services[0]["pods"] = big
		s.Services[0]["selector"] = map[string]any{"z": "1", "a": "2", "m": "3", "b": "4", "y": "5"}
		return s
	}
	first, err := New(Options{}).Render(snap())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		b, err := New(Options{}).Render(snap())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Config, first.Config) || b.Hash != first.Hash {
			t.Fatalf("render %d differs:\n%s\nvs\n%s", i, b.Config, first.Config)
		}
	}
	lines := strings.Split(string(first.Config), "\n")
	var names, ips []string
	for i := 0; i < 40; i++ {
		names = append(names, fmt.Sprintf("pod-%02d", i))
		ips = append(ips, fmt.Sprintf("10.0.0.%d", i))
	}
	sorted := strings.Join(names, " ") + " "
	for i := 0; i < 4; i++ {
		want := sorted
		if i == 2 {
			want = strings.Join(ips, " ") + " " // values in key order
		}
		if lines[i] != want {
			t.Errorf("line %d: dict loop not sorted:\n got %q\nwant %q", i+1, lines[i], want)
		}
	}
	if lines[4] != strings.Join(names, ",") {
		t.Errorf("keys() not sorted: %q", lines[4])
	}
	if lines[5] != "{'a': '2', 'b': '4', 'm': '3', 'y': '5', 'z': '1'}" {
		t.Errorf("dict printed unsorted: %q", lines[5])
	}
}

func TestTemplateSyntaxErrors(t *testing.T) {
	cases := []struct {
		name      string
		templates map[string]string
		key       string // key the error must be in
		line, col int
		msg       []string // substrings of the message
	}{
		{name: "unclosed expression", templates: map[string]string{"template": "global\n  maxconn {{ 1 + }}\n"},
			key: "template", line: 2, col: 18, msg: []string{"expected an expression, got the end of the tag"}},
		{name: "mismatched end tag", templates: map[string]string{"template": "a\n{% for s in services %}\n  {% if s.ssl %}\n{% endfor %}"},
			key: "template", line: 4, col: 4, msg: []string{"{% endfor %} does not match {% if %} opened at line 3 column 6", "expected {% endif %}"}},
		{name: "block never closed", templates: map[string]string{"template": "x\n\n  {% for s in services %}{{ s }}"},
			key: "template", line: 3, col: 6, msg: []string{"{% for %} is never closed", "{% endfor %}"}},
		{name: "tag not closed", templates: map[string]string{"template": "a {{ x\nb {% if %}"},
			key: "template", line: 2, col: 3, msg: []string{"previous one is not closed", `"}}"`}},
		{name: "unknown filter", templates: map[string]string{"template": "\n\n   {{ services|nosuchfilter }}"},
			key: "template", line: 3, col: 16, msg: []string{"unknown filter 'nosuchfilter'"}},
		{name: "unknown tag", templates: map[string]string{"template": "{% frobnicate %}"},
			key: "template", line: 1, col: 4, msg: []string{"unknown tag {% frobnicate %}"}},
		{name: "filter arity", templates: map[string]string{"template": "{{ 'a'|upper(1) }}"},
			key: "template", line: 1, col: 8, msg: []string{"filter upper takes no arguments, 1 given"}},
		{name: "error in an included key", templates: map[string]string{"template": "a\n{% include \"part\" %}", "part": "ok\nok {% if %}"},
			key: "part", line: 2, col: 10, msg: []string{"expected an expression"}},
		{name: "column counts characters", templates: map[string]string{"template": "# héllo wörld {{ ) }}"},
			key: "template", line: 1, col: 18, msg: []string{"unbalanced"}},
		{name: "CRLF line endings", templates: map[string]string{"template": "a\r\nb\r\n  {{ 1 + }}\r\n"},
			key: "template", line: 3, col: 10, msg: []string{"expected an expression"}},
		{name: "pongo2 tag error mapped back", templates: map[string]string{"template": "a\n{{ 'xxxxxxxxxxxxxxxxxxxx' }} {% widthratio 1 %}"},
			key: "template", line: 2, col: 44, msg: []string{"pongo2 parser"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ie := renderErr(t, testSnapshot(tc.templates, "template"))
			want := configRef
			want.Key = tc.key
			if ie.Ref != want {
				t.Errorf("ref %+v, want %+v", ie.Ref, want)
			}
			if ie.Line != tc.line || ie.Col != tc.col {
				t.Errorf("at line %d column %d, want line %d column %d (%v)", ie.Line, ie.Col, tc.line, tc.col, ie)
			}
			msg := ie.Error()
			for _, m := range append(tc.msg, fmt.Sprintf("key %q line %d column %d", tc.key, tc.line, tc.col)) {
				if !strings.Contains(msg, m) {
					t.Errorf("message %q does not contain %q", msg, m)
				}
			}
		})
	}
}

func TestTemplateRuntimeErrors(t *testing.T) {
	cases := []struct {
		name      string
		tpl       string
		line, col int
		msg       string
	}{
		{"filter on the wrong type", "backend x\n  {{ services[0].ports|join(',') }} {{ 5|join(',') }}", 2, 42, "filter join: needs a list, not an int"},
		{"operator on the wrong types", "{{ services[0].name + 1 }}", 1, 21, "unsupported operand types for +: string and int"},
		{"loop over a number", "\n{% for x in services[0].ports[0] %}{% endfor %}", 2, 13, "cannot loop over an int"},
		{"method that does not exist", "{{ services[0].name.nope() }}", 1, 21, "a string has no method nope()"},
		{"calling an undefined function", "{{ nope(1) }}", 1, 4, "nope is undefined, it cannot be called"},
		{"division by zero", "{{ services|length // 0 }}", 1, 20, "division by zero"},
		{"bad unpacking", "{% for a, b in services %}{% endfor %}", 1, 4, "cannot unpack"},
		{"percent format with too few values", "{{ '%s %s' % 1 }}", 1, 12, "not enough arguments"},
		{"setting an attribute of a non-namespace", "{% set x = 1 %}{% set x.y = 2 %}", 1, 19, "not a namespace()"},
		{"endless macro recursion", "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}\n{{ m(0) }}", 1, 21, "calls nested more than 64 deep"},
		{"huge range", "{% for i in range(10000000000) %}{% endfor %}", 1, 18, "range() of more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ie := renderErr(t, testSnapshot(map[string]string{"template": tc.tpl}, "template"))
			if ie.Ref.Key != "template" || ie.Line != tc.line || ie.Col != tc.col {
				t.Errorf("at %+v line %d column %d, want key template line %d column %d: %v", ie.Ref, ie.Line, ie.Col, tc.line, tc.col, ie)
			}
			if !strings.Contains(ie.Error(), tc.msg) {
				t.Errorf("message %q does not contain %q", ie.Error(), tc.msg)
			}
		})
	}
}

func TestUnsupportedConstructs(t *testing.T) {
	const unsupported = "is a Jinja2 construct that pongo2 does not support: "
	cases := []struct{ tpl, msg string }{
		{"{% extends 'base' %}", "template inheritance ({% extends %}, {% block %}) " + unsupported + `put the shared parts in another key of the ConfigMap and {% include "key" %} it`},
		{"{% block body %}{% endblock %}", "template inheritance"},
		{"{% import 'm' as m %}", "{% import %} " + unsupported + "define the macro in the template that calls it"},
		{"{% from 'm' import x %}", "define the macro in the template that calls it"},
		{"{% call m() %}{% endcall %}", unsupported + "pass the content to the macro as an argument"},
		{"{% do x.append(1) %}", unsupported + "use {% set %}, with namespace()"},
		{"{% for x in services recursive %}{% endfor %}", unsupported + "write a macro that calls itself"},
		{"{% include 'template' without context %}", unsupported + "drop it"},
		{"{% autoescape true %}{% endautoescape %}", unsupported + "an HAProxy configuration is not HTML"},
		{"{{ f(*args) }}", "*args and **kwargs in a call " + unsupported + "pass the arguments one by one"},
		{"{% for x in services %}{{ loop.previtem }}{% endfor %}", "loop.previtem " + unsupported + "loop has index"},
		{"{% trans %}x{% endtrans %}", "{% trans %} (i18n) " + unsupported + "write the text directly"},
		{"{% set k = 'template' %}{% include k %}", "needs the template key as a quoted string"},
	}
	for _, tc := range cases {
		t.Run(tc.tpl, func(t *testing.T) {
			ie := renderErr(t, testSnapshot(map[string]string{"template": tc.tpl}, "template"))
			if !strings.Contains(ie.Error(), tc.msg) || ie.Ref.Key != "template" || ie.Line != 1 || ie.Col == 0 {
				t.Errorf("error %q (key %q line %d col %d) does not say %q", ie.Error(), ie.Ref.Key, ie.Line, ie.Col, tc.msg)
			}
		})
	}
}

func TestSandbox(t *testing.T) {
	cases := []struct{ name, tpl, msg string }{
		{"ssi reads files", "{% ssi \"/etc/passwd\" %}", "reads files from the local disk and is not allowed"},
		{"ssi parsed", "{% ssi '/etc/hostname' parsed %}", "not allowed"},
		{"now is not deterministic", "{% now \"2006\" %}", "not allowed"},
		{"lorem is random", "{% lorem 2 w random %}", "not allowed"},
		{"random filter", "{{ services|random }}", "filter random is not allowed"},
		{"include of a file path", "{% include \"/etc/passwd\" %}", `there is no template key "/etc/passwd"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ie := renderErr(t, testSnapshot(map[string]string{"template": tc.tpl}, "template"))
			if !strings.Contains(ie.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", ie.Error(), tc.msg)
			}
		})
	}
	t.Run("banned in the pongo2 set too", func(t *testing.T) {
		c := compileSet(map[string]string{"t": "x"}, "t")
		if c.err != nil {
			t.Fatal(c.err)
		}
		// Parse pongo2 source directly through the same set configuration.
		prog := &program{srcs: map[string]string{}, units: map[string]*unit{}}
		u := newUnit("t", "")
		u.state, u.out = 2, `{% ssi "/etc/passwd" %}`
		prog.units["t"] = u
		compileMu.Lock()
		defer compileMu.Unlock()
		set := newSet(prog)
		if _, err := set.FromFile("t"); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("ssi through pongo2 directly: %v, want a sandbox error", err)
		}
	})
}

func TestPanicRecovered(t *testing.T) {
	cases := []struct{ name, tpl, msg string }{
		// pongo2's cycle tag divides by the number of its arguments.
		{"pongo2 panic", "{% for s in services %}{% cycle %}{% endfor %}", "internal error (panic: runtime error: integer divide by zero)"},
		{"filter panic", "{{ 'x'|test_panic }}", "internal error (panic: boom)"},
		// pongo2's own code printing an unset password: its String method panics.
		{"unset password printed by pongo2", "{% for s in services %}{% cycle stats.password 'b' %}{% endfor %}", "STATISTICS_PASSWORD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(map[string]string{"template": tc.tpl}, "template")
			s.Stats = snapshot.Stats{Username: "stats"}
			ie := renderErr(t, s)
			if !strings.Contains(ie.Error(), tc.msg) || ie.Ref.Key != "template" {
				t.Errorf("error %q (ref %+v) does not contain %q", ie.Error(), ie.Ref, tc.msg)
			}
		})
	}
}

func init() {
	// A filter that panics, for TestPanicRecovered.
	filterTable["test_panic"] = func(*filterCall, any, []any, map[string]any) (any, error) { panic("boom") }
}

func TestInclude(t *testing.T) {
	templates := map[string]string{
		"template": "frontend http\n{%- for service in services %}{% include \"acl\" %}{% endfor %}\n{% include 'footer' %}\n{% include 'absent' ignore missing %}[{% include \"empty\" %}]",
		"acl":      "\n  use_backend be_{{ service.name }} if { hdr(host) -i {{ service.hostnames|join(' ') }} } # {{ loop.index }}/{{ loop.length }}",
		"footer":   "{% include \"deeper\" %}",
		"deeper":   "# {{ services|length }} services {% set leak = 1 %}",
		"empty":    "",
		"unused":   "{{ this key is not a valid template }",
	}
	out := renderTplSet(t, templates, "template")
	want := "frontend http\n" +
		"  use_backend be_api if { hdr(host) -i api.example.com ^(www\\.)?api\\.example\\.org$ } # 1/3\n" +
		"  use_backend be_shop if { hdr(host) -i shop.example.com } # 2/3\n" +
		"  use_backend be_web if { hdr(host) -i www.example.com example.com } # 3/3\n" +
		"# 3 services \n[]\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}

	t.Run("missing key names it", func(t *testing.T) {
		ie := renderErr(t, testSnapshot(map[string]string{"template": "a\n  {% include \"haproxy-acls\" %}", "other": ""}, "template"))
		if ie.Ref.Key != "template" || ie.Line != 2 || ie.Col != 14 || !strings.Contains(ie.Error(), `there is no template key "haproxy-acls" (keys: other, template)`) {
			t.Errorf("got %v (line %d col %d)", ie, ie.Line, ie.Col)
		}
	})
	t.Run("cycle", func(t *testing.T) {
		ie := renderErr(t, testSnapshot(map[string]string{"template": "{% include 'a' %}", "a": "x\n{% include 'b' %}", "b": "{% include 'a' %}"}, "template"))
		if ie.Ref.Key != "b" || !strings.Contains(ie.Error(), "include cycle: template -> a -> b -> a") {
			t.Errorf("got %v", ie)
		}
	})
	t.Run("main key missing", func(t *testing.T) {
		ie := renderErr(t, testSnapshot(map[string]string{"other": "x"}, "template"))
		if ie.Ref.Key != "template" || !strings.Contains(ie.Error(), `there is no template key "template" (keys: other)`) {
			t.Errorf("got %v", ie)
		}
	})
	t.Run("include fan-out is bounded", func(t *testing.T) {
		set := map[string]string{"template": "{% include 'k0' %}{% include 'k0' %}"}
		for i := 0; i < 12; i++ {
			set[fmt.Sprintf("k%d", i)] = fmt.Sprintf("{%% include 'k%d' %%}{%% include 'k%d' %%}", i+1, i+1)
		}
		set["k12"] = "x"
		ie := renderErr(t, testSnapshot(set, "template"))
		if !strings.Contains(ie.Error(), "included more than 2000 times") || !strings.HasPrefix(ie.Ref.Key, "k") || ie.Line != 1 || (ie.Col != 12 && ie.Col != 31) {
			t.Errorf("got %v", ie)
		}
	})
	t.Run("include with variables", func(t *testing.T) {
		out := renderTplSet(t, map[string]string{"template": "{% include 'p' with name='x' %}|{{ name }}", "p": "{{ name }}"}, "template")
		if out != "x|\n" {
			t.Errorf("got %q", out)
		}
	})
}

func renderTplSet(t *testing.T, templates map[string]string, key string) string {
	t.Helper()
	b, err := New(Options{SSLDir: "/ssl"}).Render(testSnapshot(templates, key))
	if err != nil {
		t.Fatal(err)
	}
	return string(b.Config)
}

func TestStatsPassword(t *testing.T) {
	unset := snapshot.Stats{Username: "stats"}
	set := snapshot.Stats{Username: "stats", Password: "s3cret", PasswordSet: true}
	cases := []struct {
		name  string
		stats snapshot.Stats
		tpl   string
		want  string // output; "" with errMsg set means an error
		err   bool
	}{
		{"if is false when unset", unset, "{% if stats.password %}stats auth{% else %}no stats{% endif %}", "no stats", false},
		{"if is true when set", set, "{% if stats.password %}stats auth {{ stats.username }}:{{ stats.password }}{% endif %}", "stats auth stats:s3cret", false},
		{"printing an unset password fails", unset, "listen stats\n  stats auth {{ stats.username }}:{{ stats.password }}", "", true},
		{"concatenating an unset password fails", unset, "{% set auth = stats.username ~ ':' ~ stats.password %}", "", true},
		{"formatting an unset password fails", unset, "{{ '%s' % stats.password }}", "", true},
		{"filtering an unset password fails", unset, "{{ stats.password|upper }}", "", true},
		{"is defined is false when unset", unset, "{{ stats.password is defined }}", "False", false},
		{"an explicit default is the template's choice", unset, "{{ stats.password|default('changeme') }}", "changeme", false},
		{"empty password set is allowed", snapshot.Stats{Username: "stats", PasswordSet: true}, "[{{ stats.password }}]", "[]", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(map[string]string{"template": tc.tpl}, "template")
			s.Stats = tc.stats
			b, err := New(Options{}).Render(s)
			if tc.err {
				if err == nil {
					t.Fatalf("rendered %q, want an error", b.Config)
				}
				for _, m := range []string{"stats.password", "STATISTICS_PASSWORD", `key "template"`} {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not name %s", err, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(string(b.Config), "\n"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("original basic example needs a password", func(t *testing.T) {
		data := loadConfigMapData(t, originalExamples+"/basic.yaml")
		s := originalSnapshot(t, data, "template")
		s.Stats = unset
		ie := renderErr(t, s)
		if ie.Ref.Key != "template" || ie.Line != 31 || ie.Col != 35 || !strings.Contains(ie.Error(), "STATISTICS_PASSWORD") {
			t.Errorf("got %v (line %d)", ie, ie.Line)
		}
	})
}

func TestBundle(t *testing.T) {
	s := testSnapshot(map[string]string{"template": "{% for c in certificates %}crt {{ ssldir }}/{{ c }}.pem\n{% endfor %}"}, "template")
	r := New(Options{SSLDir: "/run/haproxy/ssl"})
	b, err := r.Render(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b.Config), "crt /run/haproxy/ssl/example.com.pem\ncrt /run/haproxy/ssl/shop.pem\n"; got != want {
		t.Errorf("config %q, want %q", got, want)
	}
	// Keys are certificate names; the generation store writes <name>.pem.
	if len(b.Certificates) != 2 || string(b.Certificates["example.com"]) != "PEM1" || string(b.Certificates["shop"]) != "PEM2" {
		t.Errorf("certificates %v", b.Certificates)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(b.Hash) {
		t.Errorf("hash %q is not hex sha256", b.Hash)
	}

	hash := func(mod func(s *snapshot.Snapshot)) string {
		s := testSnapshot(map[string]string{"template": "{% for c in certificates %}crt {{ ssldir }}/{{ c }}.pem\n{% endfor %}"}, "template")
		mod(s)
		b, err := r.Render(s)
		if err != nil {
			t.Fatal(err)
		}
		return b.Hash
	}
	if h := hash(func(*snapshot.Snapshot) {}); h != b.Hash {
		t.Error("same input, different hash")
	}
	if h := hash(func(s *snapshot.Snapshot) { s.Certificates[1].PEM = []byte("PEM2 renewed") }); h == b.Hash {
		t.Error("a certificate change does not change the hash")
	}
	if h := hash(func(s *snapshot.Snapshot) {
		s.Certificates[0], s.Certificates[1] = s.Certificates[1], s.Certificates[0]
	}); h == b.Hash {
		t.Error("the config changed (certificate order) but the hash did not")
	}
	if h := hash(func(s *snapshot.Snapshot) { s.Services = nil }); h != b.Hash {
		t.Error("the services are not in the output, the hash must not change")
	}

	for _, bad := range []string{"", "..", ".hidden", "a/b", "x\x00", "a\nb"} {
		s := testSnapshot(map[string]string{"template": "x"}, "template")
		s.Certificates = []snapshot.Certificate{{Name: bad, PEM: []byte("x"), Ref: snapshot.Ref{Kind: "Secret", Namespace: "lb", Name: "keys"}}}
		ie := renderErr(t, s)
		if ie.Ref.Kind != "Secret" || !strings.Contains(ie.Error(), "cannot be a file name") {
			t.Errorf("certificate name %q: %v", bad, ie)
		}
	}
}

func TestDefaultTemplateErrorsNameTheFile(t *testing.T) {
	s := testSnapshot(nil, "")
	s.Services[0]["hostnames"] = []any{int64(42)}
	ie := renderErr(t, s)
	if ie.Ref != (snapshot.Ref{Kind: "File", Name: "templates/rules.j2"}) || ie.Line == 0 || !strings.Contains(ie.Error(), "has no method startswith()") {
		t.Errorf("got %+v: %v", ie.Ref, ie)
	}
}

func TestConcurrentRender(t *testing.T) {
	r := New(Options{SSLDir: "/ssl"})
	sets := []map[string]string{
		nil, // the default template
		{"template": "{% for s in services %}{{ s.name }}{% endfor %}"},
		{"template": "{% for s in services %}{% for n, p in s.pods.items() %}{{ n }}{% endfor %}{% endfor %}{% include 'x' %}", "x": "{{ services|length }}"},
	}
	want := make([][]byte, len(sets))
	for i, set := range sets {
		b, err := New(Options{SSLDir: "/ssl"}).Render(testSnapshot(set, "template"))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b.Config
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				k := (g + i) % len(sets)
				// Distinct template text too, so compiles race with renders.
				set := sets[k]
				if i%5 == 0 && set != nil {
					set = map[string]string{"template": set["template"] + fmt.Sprintf("{# %d #}", g), "x": "{{ services|length }}"}
				}
				b, err := r.Render(testSnapshot(set, "template"))
				if err != nil {
					errs <- err
					return
				}
				if set == nil || set["template"] == sets[k]["template"] {
					if !bytes.Equal(b.Config, want[k]) {
						errs <- fmt.Errorf("goroutine %d: set %d rendered differently", g, k)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCompileCache(t *testing.T) {
	r := New(Options{})
	set := map[string]string{"template": "{{ services|length }}"}
	c1 := r.compile(set, "template")
	c2 := r.compile(map[string]string{"template": "{{ services|length }}"}, "template")
	if c1 != c2 {
		t.Error("the same template set was compiled twice")
	}
	bad := map[string]string{"template": "{% if %}"}
	if b1, b2 := r.compile(bad, "template"), r.compile(bad, "template"); b1 != b2 || b1.err == nil {
		t.Error("a template with an error is not cached")
	}
	if c3 := r.compile(map[string]string{"template": "{{ services|length }}", "other": ""}, "template"); c3 == c1 {
		t.Error("a different set of keys shares the cache entry")
	}
	for i := 0; i < 3*cacheSize; i++ {
		r.compile(map[string]string{"template": fmt.Sprintf("%d", i)}, "template")
	}
	if len(r.cache) > cacheSize || len(r.lru) > cacheSize {
		t.Errorf("cache holds %d entries (lru %d), bound is %d", len(r.cache), len(r.lru), cacheSize)
	}
	// Recently used entries survive.
	r.compile(set, "template")
	for i := 0; i < cacheSize-1; i++ {
		r.compile(map[string]string{"template": fmt.Sprintf("again %d", i)}, "template")
		r.compile(set, "template")
	}
	if r.compile(set, "template") != r.cache[setKey(set, "template")] || r.cache[setKey(set, "template")] == nil {
		t.Error("a recently used entry was evicted")
	}
}

func TestMiscOutput(t *testing.T) {
	cases := []struct{ name, tpl, want string }{
		{"CRLF becomes LF", "a\r\n{{ 1 }}\r\nb\r\n", "a\n1\nb\n"},
		{"autoescape false is accepted", "{% autoescape false %}{{ '<&>' }}{% endautoescape %}", "<&>\n"},
		{"no HTML escaping", "{{ '<a href=\"x\">&</a>' }} {{ '<'|e }}", "<a href=\"x\">&</a> &lt;\n"},
		{"trailing newline added once", "x", "x\n"},
		{"empty output", "{% if false %}x{% endif %}", ""},
		{"env and ssldir", "{{ env.REGION }} {{ env.NOPE|default('d') }} {{ ssldir }}", "eu d /ssl\n"},
		{"internal state is not visible", "[{{ _hs_render }}]", "[]\n"},
		{"hquote", "{{ 'a b\"$\\\\c'|hquote }}", "\"a b\\\"\\$\\\\c\"\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderTpl(t, tc.tpl); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
