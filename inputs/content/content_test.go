package content

import "testing"

// The hash is persisted in state directories (generation names, the record of what HAProxy
// runs, the Data Plane API hosts' state): these values were computed by the renderer's hash
// before it moved here, and must never change.
func TestHashIsStable(t *testing.T) {
	config := []byte("global\n  log stdout format raw local0\n")
	certs := map[string][]byte{"example.com": []byte("PEM one\n"), "lb.web-tls": []byte("PEM two\n")}
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{"config, certificates, map files and files", Files{
			Config: config,
			Certs:  certs,
			Maps:   map[string][]byte{"hosts.map": []byte("a.example.com web\n")},
			Files:  map[string][]byte{"error.http": []byte("HTTP/1.0 503\r\n\r\n"), "auth.lua": []byte("-- lua\n")},
		}, "aa3fcb74c253b1bb9ef5b0f19dbb36b6bf221e9414fe6805c8e1772515803d87"},
		{"config and certificates", Files{Config: config, Certs: certs},
			"0c1460062d2f051eee5a4bc6828ee9de9b0b58d67bf97f60b5f8cb1ab9f14a77"},
		{"nothing", Files{}, "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc"},
		{"an empty map file", Files{Config: []byte("c\n"), Maps: map[string][]byte{"m": nil}},
			"6bc2a0dac661a72758116438b28e059a8b0dcc0d66511ceeb1ac0cf62ea5fb2a"},
	} {
		if got := tc.files.Hash(); got != tc.want {
			t.Errorf("%s: hash %s, want %s", tc.name, got, tc.want)
		}
	}
}

// Empty and missing maps hash alike (the Data Plane API reloader reads empty directories as
// empty maps, the renderer leaves them nil), and a file moved between the sets changes it.
func TestHashSets(t *testing.T) {
	base := Files{Config: []byte("c"), Certs: map[string][]byte{"a": []byte("k")}}
	empty := base
	empty.Maps, empty.Files = map[string][]byte{}, map[string][]byte{}
	if base.Hash() != empty.Hash() {
		t.Error("empty map and file sets change the hash")
	}
	asMap, asFile := base, base
	asMap.Maps = map[string][]byte{"x": []byte("1")}
	asFile.Files = map[string][]byte{"x": []byte("1")}
	asCert := Files{Config: []byte("c"), Certs: map[string][]byte{"a": []byte("k"), "x": []byte("1")}}
	if h := map[string]bool{asMap.Hash(): true, asFile.Hash(): true, asCert.Hash(): true}; len(h) != 3 {
		t.Error("the same name and bytes as a map file, a file and a certificate hash alike")
	}
}

// A Hasher given the configuration, then the rest, gives Files.Hash: with and without
// certificates, map files and other files.
func TestHasherIsFilesHash(t *testing.T) {
	for _, f := range []Files{
		{},
		{Config: []byte("global\n")},
		{Config: []byte("global\n"), Certs: map[string][]byte{"b": []byte("B"), "a": []byte("A")}},
		{Config: []byte("global\n"), Maps: map[string][]byte{"hosts.map": []byte("a b\n")}},
		{Config: []byte("x"), Certs: map[string][]byte{"a": nil}, Maps: map[string][]byte{"m.map": nil, "n.map": []byte("k v\n")},
			Files: map[string][]byte{"503.http": []byte("HTTP/1.0 503\r\n\r\n")}},
	} {
		h := NewHasher()
		h.Config(f.Config)
		if got, want := h.Sum(f), f.Hash(); got != want {
			t.Errorf("%+v: %s, want %s", f, got, want)
		}
	}
}
