package render

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

var auxOpts = Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", FilesDir: "/etc/haproxy/files"}

func renderAux(t *testing.T, templates map[string]string) *Bundle {
	t.Helper()
	b, err := New(auxOpts).Render(context.Background(), testSnapshot(templates, "template"))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return b
}

// Keys ending in .map are map files rendered with the main template's context; files.NAME is
// copied as it is and files.NAME.j2 rendered; templates see mapsdir and filesdir; every key
// can still be included.
func TestAuxiliaryFiles(t *testing.T) {
	lua := "local t = {{1, 2}, {3, 4}}\ncore.register_service('x', 'http', function(a) end)\n"
	page := "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/html\r\n\r\n<p>{{ vue.message }}</p>{% raw %}"
	b := renderAux(t, map[string]string{
		"template": "use_backend %[req.hdr(host),lower,map({{ mapsdir }}/hosts.map)]\n" +
			"lua-load {{ filesdir }}/cors.lua\nerrorfile 503 {{ filesdir }}/503.http\n" +
			"# {% include 'hosts.map' %}",
		"hosts.map":           "{% for s in services %}{% for h in s.hostnames %}{{ h }} be_{{ s.name }}\n{% endfor %}{% endfor %}",
		"paths.map":           "/static be_static", // no final newline: one is added
		"files.cors.lua":      lua,
		"files.503.http":      page,
		"files.region.txt.j2": "region {{ env.REGION }} maps in {{ mapsdir }}",
		"macros":              "{% macro x() %}x{% endmacro %}",
	})
	wantConfig := "use_backend %[req.hdr(host),lower,map(/etc/haproxy/maps/hosts.map)]\n" +
		"lua-load /etc/haproxy/files/cors.lua\nerrorfile 503 /etc/haproxy/files/503.http\n" +
		"# api.example.com be_api\n"
	if !strings.HasPrefix(string(b.Config), wantConfig) {
		t.Errorf("config:\n%s\nwant it to start with:\n%s", b.Config, wantConfig)
	}
	wantMaps := map[string]string{
		"hosts.map": "api.example.com be_api\n^(www\\.)?api\\.example\\.org$ be_api\nshop.example.com be_shop\nwww.example.com be_web\nexample.com be_web\n",
		"paths.map": "/static be_static\n",
	}
	if len(b.Maps) != len(wantMaps) {
		t.Errorf("maps %v, want %v", keys(b.Maps), keys(wantMaps))
	}
	for name, want := range wantMaps {
		if got := string(b.Maps[name]); got != want {
			t.Errorf("map %s:\n%q\nwant\n%q", name, got, want)
		}
	}
	wantFiles := map[string]string{
		"cors.lua":   lua,  // byte for byte, {{ and all
		"503.http":   page, // CRLF kept, {{ and an unclosed {% raw %} kept
		"region.txt": "region eu maps in /etc/haproxy/maps",
	}
	if len(b.Files) != len(wantFiles) {
		t.Errorf("files %v, want %v", keys(b.Files), keys(wantFiles))
	}
	for name, want := range wantFiles {
		if got := string(b.Files[name]); got != want {
			t.Errorf("file %s:\n%q\nwant\n%q", name, got, want)
		}
	}
	if _, ok := b.Files["macros"]; ok {
		t.Error("a key that is neither a map nor a file was written as a file")
	}

	t.Run("the main template is never a file", func(t *testing.T) {
		b, err := New(auxOpts).Render(context.Background(), testSnapshot(map[string]string{"haproxy.map": "global\n"}, "haproxy.map"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Maps) != 0 || string(b.Config) != "global\n" {
			t.Errorf("config %q, maps %v", b.Config, keys(b.Maps))
		}
	})
	t.Run("a raw file may include files. keys too", func(t *testing.T) {
		b := renderAux(t, map[string]string{"template": "{% include 'files.part' %}", "files.part": "{{ mapsdir }}"})
		if string(b.Config) != "/etc/haproxy/maps\n" || string(b.Files["part"]) != "{{ mapsdir }}" {
			t.Errorf("config %q, file %q", b.Config, b.Files["part"])
		}
	})
}

// The hash covers the map files and the other files; a bundle without them hashes as before
// they existed (a restarted sidecar does not reload for an upgrade).
func TestAuxiliaryFilesHash(t *testing.T) {
	base := map[string]string{"template": "x {{ mapsdir }}", "hosts.map": "a b", "files.x.lua": "y"}
	h0 := renderAux(t, base).Hash
	for name, mod := range map[string]func(m map[string]string){
		"map content":  func(m map[string]string) { m["hosts.map"] = "a c" },
		"map name":     func(m map[string]string) { delete(m, "hosts.map"); m["other.map"] = "a b" },
		"file content": func(m map[string]string) { m["files.x.lua"] = "z" },
		"file added":   func(m map[string]string) { m["files.y"] = "" },
		"map removed":  func(m map[string]string) { delete(m, "hosts.map") },
		// The same bytes as a map or as a file are different bundles.
		"map becomes file": func(m map[string]string) { delete(m, "hosts.map"); m["files.hosts.map"] = "a b\n" },
	} {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		mod(m)
		if h := renderAux(t, m).Hash; h == h0 {
			t.Errorf("%s: the hash did not change", name)
		}
	}
	if h := renderAux(t, base).Hash; h != h0 {
		t.Error("same input, different hash")
	}

	plain := renderAux(t, map[string]string{"template": "{% for c in certificates %}{{ c }}\n{% endfor %}"})
	if want := legacyHash(plain.Config, plain.Certificates); plain.Hash != want {
		t.Errorf("a bundle without map files hashes %s, before them it hashed %s", plain.Hash, want)
	}
}

// legacyHash is the bundle hash as it was before map files and other files existed.
func legacyHash(config []byte, certs map[string][]byte) string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write(config)
	for _, name := range keys(certs) {
		write([]byte(name))
		write(certs[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A bad map template is a render error naming its key and line, like the main template; a
// key whose file name cannot be one is an error naming the key.
func TestAuxiliaryFileErrors(t *testing.T) {
	cases := []struct {
		name      string
		templates map[string]string
		key       string
		line      int
		want      string
	}{
		{"map syntax", map[string]string{"template": "x", "hosts.map": "a b\n{% for %}"}, "hosts.map", 2, "expected a name"},
		{"map runtime", map[string]string{"template": "x", "hosts.map": "a b\n\n{{ services[0].nothing.deeper }}"}, "hosts.map", 3, "nothing"},
		{"map include", map[string]string{"template": "x", "hosts.map": "{% include 'part' %}", "part": "\n{{ 1 / 0 }}"}, "part", 2, "division"},
		{"rendered file", map[string]string{"template": "x", "files.page.http.j2": "{% if %}"}, "files.page.http.j2", 1, ""},
		{"two extensions", map[string]string{"template": "x", "hosts.v2.map": "a b"}, "hosts.v2.map", 0, "cannot be a file name"},
		{"empty file name", map[string]string{"template": "x", "files.": "a"}, "files.", 0, "empty"},
		{"empty rendered name", map[string]string{"template": "x", "files..j2": "a"}, "files..j2", 0, "empty"},
		{"dots", map[string]string{"template": "x", "files.a.b.lua": "a"}, "files.a.b.lua", 0, "cannot be a file name"},
		{"hidden", map[string]string{"template": "x", "files..lua": "a"}, "files..lua", 0, "cannot be a file name"},
		{"over budget", map[string]string{"template": "x", "big.map": "{% for i in range(100000) %}0123456789{% endfor %}"}, "big.map", 1, "output budget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(Options{MaxOutput: 64 << 10}).Render(context.Background(), testSnapshot(c.templates, "template"))
			ie, ok := err.(*snapshot.InputError)
			if !ok {
				t.Fatalf("error %v (%T), want an *snapshot.InputError", err, err)
			}
			if ie.Stage != snapshot.StageRender || ie.Ref.Kind != "ConfigMap" || ie.Ref.Name != "config" || ie.Ref.Key != c.key {
				t.Errorf("error names %+v at stage %s, want key %q of the config ConfigMap: %v", ie.Ref, ie.Stage, c.key, ie)
			}
			if c.line > 0 && ie.Line != c.line {
				t.Errorf("line %d, want %d: %v", ie.Line, c.line, ie)
			}
			if !strings.Contains(ie.Error(), c.want) {
				t.Errorf("error %q does not say %q", ie.Error(), c.want)
			}
		})
	}
}

// A file copied as it is is not compiled: text that is not a template does no harm.
func TestRawFileNotCompiled(t *testing.T) {
	b := renderAux(t, map[string]string{"template": "x", "files.broken.lua": "{% for %} {{"})
	if string(b.Files["broken.lua"]) != "{% for %} {{" {
		t.Errorf("file %q", b.Files["broken.lua"])
	}
}

// The bundle's hash, its configuration hashed beside the map files' render (hashConfig), is
// the hash of its files, with and without map files and other files.
func TestBundleHashIsItsFilesHash(t *testing.T) {
	for _, templates := range []map[string]string{
		{"template": "global\n{% for s in services %}# {{ s.name }}\n{% endfor %}"},
		{"template": "global\n", "hosts.map": "{% for s in services %}{{ s.name }} be_{{ s.name }}\n{% endfor %}",
			"files.503.http": "HTTP/1.0 503\r\n\r\n"},
	} {
		b := renderAux(t, templates)
		want := content.Files{Config: b.Config, Certs: b.Certificates, Maps: b.Maps, Files: b.Files}.Hash()
		if b.Hash != want {
			t.Errorf("%v: hash %s, want %s", keys(templates), b.Hash, want)
		}
	}
}
