package render

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
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
		setField(s, 0, "pods", big)
		setField(s, 0, "selector", map[string]any{"z": "1", "a": "2", "m": "3", "b": "4", "y": "5"})
		return s
	}
	first, err := New(Options{}).Render(context.Background(), snap())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		b, err := New(Options{}).Render(context.Background(), snap())
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
			key: "template", line: 4, col: 4, msg: []string{"{% endfor %} does not match {% if %} opened at line 3 column 6", "expected {% elif %} or {% else %} or {% endif %}"}},
		{name: "block never closed", templates: map[string]string{"template": "x\n\n  {% for s in services %}{{ s }}"},
			key: "template", line: 3, col: 6, msg: []string{"{% for %} is never closed", "{% endfor %}"}},
		{name: "tag not closed", templates: map[string]string{"template": "a {{ x\nb {% if %}"},
			key: "template", line: 1, col: 3, msg: []string{`this {{ is never closed: expected "}}" before the next tag, at line 2 column 3`}},
		{name: "unknown filter", templates: map[string]string{"template": "\n\n   {{ services|nosuchfilter }}"},
			key: "template", line: 3, col: 16, msg: []string{"unknown filter 'nosuchfilter'"}},
		{name: "unknown tag", templates: map[string]string{"template": "{% frobnicate %}"},
			key: "template", line: 1, col: 4, msg: []string{"unknown tag {% frobnicate %}"}},
		{name: "filter arity", templates: map[string]string{"template": "{{ 'a'|upper(1) }}"},
			key: "template", line: 1, col: 8, msg: []string{"filter upper: upper() takes 0 positional argument(s) but 1 were given"}},
		{name: "error in an included key", templates: map[string]string{"template": "a\n{% include \"part\" %}", "part": "ok\nok {% if %}"},
			key: "part", line: 2, col: 10, msg: []string{"expected an expression"}},
		{name: "column counts characters", templates: map[string]string{"template": "# héllo wörld {{ ) }}"},
			key: "template", line: 1, col: 18, msg: []string{"unbalanced"}},
		{name: "CRLF line endings", templates: map[string]string{"template": "a\r\nb\r\n  {{ 1 + }}\r\n"},
			key: "template", line: 3, col: 10, msg: []string{"expected an expression"}},
		{name: "pongo2 tag error", templates: map[string]string{"template": "a\n{{ 'xxxxxxxxxxxxxxxxxxxx' }} {% widthratio 1 %}"},
			key: "template", line: 2, col: 46, msg: []string{"{% widthratio %} takes 3 arguments (value, maximum, width), 1 given"}},
		{name: "include by a computed key", templates: map[string]string{"template": "{% set k = 'template' %}\n  {% include k %}"},
			key: "template", line: 2, col: 14, msg: []string{"{% include %} needs the template key as a quoted string"}},
		{name: "i18n is not enabled", templates: map[string]string{"template": "{% trans %}x{% endtrans %}"},
			key: "template", line: 1, col: 4, msg: []string{"unknown tag {% trans %}", "write the text directly"}},
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
		{"filter on the wrong type", "backend x\n  {{ services[0].ports|join(',') }} {{ 5|join(',') }}", 2, 42, "filter join: 'int' object is not iterable"},
		{"operator on the wrong types", "{{ services[0].name + 1 }}", 1, 21, "unsupported operand type(s) for +: 'str' and 'int'"},
		{"loop over a number", "\n{% for x in services[0].ports[0] %}{% endfor %}", 2, 13, "cannot loop over an int: 'int' object is not iterable"},
		{"method that does not exist", "{{ services[0].name.nope() }}", 1, 21, "'str object' has no attribute 'nope'"},
		{"calling an undefined function", "{{ nope(1) }}", 1, 4, "'nope' is undefined"},
		{"division by zero", "{{ services|length // 0 }}", 1, 20, "integer division or modulo by zero"},
		{"bad unpacking", "{% for a, b in services %}{% endfor %}", 1, 4, "cannot unpack"},
		{"percent format with too few values", "{{ '%s %s' % 1 }}", 1, 12, "not enough arguments"},
		{"setting an attribute of a non-namespace", "{% set x = 1 %}{% set x.y = 2 %}", 1, 19, "not a namespace()"},
		{"endless macro recursion", "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}\n{{ m(0) }}", 1, 21, "macro calls nested more than 256 deep"},
		{"attribute of an undefined value", "{{ services[0].nope.deeper }}", 1, 21, "'dict object' has no attribute 'nope'"},
		{"loop outside a loop", "\n{{ loop.index }}", 2, 9, "'loop' is undefined"},
		{"sort by an attribute some items lack", "{{ services|sort(attribute='path') }}", 1, 13, "'dict object' has no attribute 'path'"},
		{"range beyond 64 bits", "{{ range(2 ** 64) }}", 1, 9, "range() arguments beyond 64 bits"},
		{"the input data is read only", "{% do services.append(1) %}", 1, 16, "this list comes from the input data"},
		{"unknown filter in a branch that runs", "{% if services %}\n  {{ services|nosuchfilter }}{% endif %}", 2, 15, "unknown filter 'nosuchfilter'"},
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

// TestFormerlyUnsupported: Jinja2 constructs the pongo2-based renderer refused render as
// Jinja2 renders them (the differential test in package jinja checks them against Jinja2).
func TestFormerlyUnsupported(t *testing.T) {
	set := map[string]string{
		"base":   "<{% block body %}base{% endblock %}>",
		"macros": "{% macro hello(who) %}hello {{ who }}{% endmacro %}",
	}
	cases := []struct{ tpl, want string }{
		{"{% extends 'base' %}{% block body %}child {{ super() }}{% endblock %}", "<child base>"},
		{"{% import 'macros' as m %}{{ m.hello('a') }}", "hello a"},
		{"{% from 'macros' import hello %}{{ hello('b') }}", "hello b"},
		{"{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}body{% endcall %}", "[body]"},
		{"{% set l = [] %}{% do l.append(1) %}{% set _ = l.extend([2]) %}{{ l }}", "[1, 2]"},
		{"{% for s in services %}{{ loop.previtem.name if loop.previtem is defined else '-' }}{% endfor %}", "-apishop"},
		{"{% for x in [[1, [2]], 3] recursive %}{% if x is iterable %}({{ loop(x) }}){% else %}{{ x }}{% endif %}{% endfor %}", "(1(2))3"},
		{"{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(*[1, 2], **{'a': 3}) }}", "(1, 2){'a': 3}"},
		{"{% autoescape true %}{{ '<' }}{% endautoescape %}", "&lt;"},
		{"{% set j = joiner('|') %}{% for s in services %}{{ j() }}{{ s.name }}{% endfor %}", "api|shop|web"},
	}
	for _, tc := range cases {
		tpls := map[string]string{"template": tc.tpl}
		for k, v := range set {
			tpls[k] = v
		}
		if got := renderTplSet(t, tpls, "template"); got != tc.want+"\n" {
			t.Errorf("%s\n got %q\nwant %q", tc.tpl, got, tc.want+"\n")
		}
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
		if (ie.Ref.Key != "a" && ie.Ref.Key != "b") || !strings.Contains(ie.Error(), "includes nested more than 256 deep") {
			t.Errorf("got %v", ie)
		}
	})
	t.Run("main key missing", func(t *testing.T) {
		ie := renderErr(t, testSnapshot(map[string]string{"other": "x"}, "template"))
		if ie.Ref.Key != "template" || !strings.Contains(ie.Error(), `there is no template key "template" (keys: other)`) {
			t.Errorf("got %v", ie)
		}
	})
	t.Run("include fan-out is compiled once per key", func(t *testing.T) {
		set := map[string]string{"template": "{% include 'k0' %}{% include 'k0' %}"}
		for i := 0; i < 12; i++ {
			set[fmt.Sprintf("k%d", i)] = fmt.Sprintf("{%% include 'k%d' %%}{%% include 'k%d' %%}", i+1, i+1)
		}
		set["k12"] = "x"
		if out := renderTplSet(t, set, "template"); out != strings.Repeat("x", 1<<13)+"\n" {
			t.Errorf("got %d bytes", len(out))
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
	b, err := New(Options{SSLDir: "/ssl"}).Render(context.Background(), testSnapshot(templates, key))
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
			b, err := New(Options{}).Render(context.Background(), s)
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
	b, err := r.Render(context.Background(), s)
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
		b, err := r.Render(context.Background(), s)
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
	setField(s, 0, "hostnames", []any{int64(42)})
	ie := renderErr(t, s)
	if ie.Ref != (snapshot.Ref{Kind: "File", Name: "templates/rules.j2"}) || ie.Line == 0 || !strings.Contains(ie.Error(), "'int object' has no attribute 'startswith'") {
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
		b, err := New(Options{SSLDir: "/ssl"}).Render(context.Background(), testSnapshot(set, "template"))
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
				b, err := r.Render(context.Background(), testSnapshot(set, "template"))
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
	if st := r.cache[setKey(set)]; st == nil || r.compile(set, "template") != st.roots["template"] {
		t.Error("a recently used entry was evicted")
	}
}

func TestMiscOutput(t *testing.T) {
	cases := []struct{ name, tpl, want string }{
		{"CRLF becomes LF", "a\r\n{{ 1 }}\r\nb\r\n", "a\n1\nb\n"},
		{"an escaped carriage return stays one", `{{ '\r' }}|{{ "a\r\nb" }}`, "\r|a\r\nb\n"},
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

// TestRendersRunOnPongo2: a render is a pongo2 execution (the host template's one tag runs
// the program), and two renderers render in parallel with no shared state.
func TestRendersRunOnPongo2(t *testing.T) {
	var h host
	tpl, err := h.template()
	if err != nil || tpl == nil {
		t.Fatalf("host template: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := New(Options{SSLDir: "/ssl"})
			b, err := r.Render(context.Background(), &snapshot.Snapshot{TemplateKey: "t",
				Templates: map[string]string{"t": fmt.Sprintf("n={{ %d * 2 }}", i)}})
			if err != nil {
				t.Error(err)
				return
			}
			if want := fmt.Sprintf("n=%d\n", i*2); string(b.Config) != want {
				t.Errorf("got %q, want %q", b.Config, want)
			}
		})
	}
	wg.Wait()
	if _, err := h.run(&job{}); err == nil {
		t.Error("a job without a program ran")
	}
}

// TestACarriageReturnIsKept: a carriage return the template writes is printed as Jinja2
// prints it; the configuration then ends with the newline every haproxy.cfg gets (after the
// CR, not instead of it).
func TestACarriageReturnIsKept(t *testing.T) {
	for src, want := range map[string]string{
		"{{ '\\r' }}":        "\r\n",
		"{{ '\\r' }}\n":      "\r\n",
		"a{{ '\\r' }}b\n":    "a\rb\n",
		"a{{ '\\r\\n' }}b\n": "a\r\nb\n",
	} {
		s := &snapshot.Snapshot{Templates: map[string]string{"template": src}, TemplateKey: "template"}
		b, err := New(Options{}).Render(context.Background(), s)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if string(b.Config) != want {
			t.Errorf("%q renders %q, want %q", src, b.Config, want)
		}
	}
}

// The key of a template set is taken from the last set only when each text is the same
// string: a text changed in place of the same length (a new string) compiles the new text,
// in another map or in the same one.
func TestSetKeySeesEachTextChanged(t *testing.T) {
	r := New(Options{})
	a := map[string]string{"template": strings.Clone("global A\n"), "x.map": strings.Clone("k v\n")}
	b := map[string]string{"template": strings.Clone("global B\n"), "x.map": a["x.map"]}
	for i, srcs := range []map[string]string{a, a, b, a, maps.Clone(a)} {
		if got, want := r.setKey(srcs), setKey(srcs); got != want {
			t.Errorf("set %d: key %x, want %x", i, got, want)
		}
	}
	// The same map, a text set anew in it.
	r.setKey(a)
	a["template"] = strings.Clone("global C\n")
	if got, want := r.setKey(a), setKey(a); got != want {
		t.Errorf("a changed in place: key %x, want %x", got, want)
	}
	out, err := r.compile(b, "template").prog.Render(context.Background(), nil, jinja.Limits{}, nil)
	if err != nil || string(out) != "global B" {
		t.Errorf("b renders %q, %v", out, err)
	}
}
