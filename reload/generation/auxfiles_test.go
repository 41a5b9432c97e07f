package generation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maps and files are the map and file directories at their defaults, beside the config.
func (e env) maps() string  { return filepath.Join(filepath.Dir(e.config), MapsDirName) }
func (e env) files() string { return filepath.Join(filepath.Dir(e.config), FilesDirName) }

// stageAux stages a generation whose config, map hosts.map and file page.http all say v.
func stageAux(t *testing.T, s *Store, v string) *Generation {
	t.Helper()
	g, err := s.StageContent(Content{
		Config: []byte("config " + v),
		Certs:  map[string][]byte{"site": []byte("cert " + v)},
		Maps:   map[string][]byte{"hosts.map": []byte("map " + v)},
		Files:  map[string][]byte{"page.http": []byte("page " + v)},
	}, "")
	if err != nil {
		t.Fatalf("StageContent: %v", err)
	}
	return g
}

// seenAux is what HAProxy reads through the stable paths: config, cert, map and file.
func seenAux(t *testing.T, e env) string {
	t.Helper()
	return strings.Join([]string{read(t, e.config), read(t, filepath.Join(e.ssl, "site.pem")),
		read(t, filepath.Join(e.maps(), "hosts.map")), read(t, filepath.Join(e.files(), "page.http"))}, "|")
}

func all(v string) string {
	return fmt.Sprintf("config %s|cert %s|map %s|page %s", v, v, v, v)
}

// Map files and other files are part of the generation: staged beside it, swapped with it in
// one rename, rolled back with it, pruned with it.
func TestAuxiliaryFilesSwapWithTheGeneration(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	if s.MapsDir() != e.maps() || s.FilesDir() != e.files() {
		t.Fatalf("MapsDir %s, FilesDir %s, want them beside the config", s.MapsDir(), s.FilesDir())
	}
	g1, g2 := stageAux(t, s, "1"), stageAux(t, s, "2")
	for _, p := range []string{e.maps(), e.files()} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("staging created %s (%v)", p, err)
		}
	}
	mustActivate(t, s, g1)
	if got := seenAux(t, e); got != all("1") {
		t.Fatalf("after Activate(g1): %s", got)
	}
	for path, want := range map[string]string{
		e.maps():  filepath.Join(DefaultStateDirName, CurrentName, MapsDirName),
		e.files(): filepath.Join(DefaultStateDirName, CurrentName, FilesDirName),
	} {
		if got, err := os.Readlink(path); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", path, got, err, want)
		}
	}
	mustActivate(t, s, g2)
	if got := seenAux(t, e); got != all("2") {
		t.Fatalf("after Activate(g2): %s", got)
	}
	if err := s.Rollback(g1); err != nil {
		t.Fatal(err)
	}
	if got := seenAux(t, e); got != all("1") {
		t.Fatalf("after Rollback: %s", got)
	}
	if err := s.Prune(g1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g2.MapsDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Prune left the rolled-back generation's maps (%v)", err)
	}
	if got := seenAux(t, e); got != all("1") {
		t.Fatalf("after Prune: %s", got)
	}

	t.Run("modes", func(t *testing.T) {
		for path, want := range map[string]os.FileMode{
			g1.MapsDir():                              auxDirMode,
			g1.FilesDir():                             auxDirMode,
			filepath.Join(g1.MapsDir(), "hosts.map"):  auxMode,
			filepath.Join(g1.FilesDir(), "page.http"): auxMode,
		} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode().Perm(), err, want)
			}
		}
	})
	t.Run("a generation without maps has empty directories: the links never dangle", func(t *testing.T) {
		g := stage(t, s, "config 3", "cert 3")
		mustActivate(t, s, g)
		for _, dir := range []string{e.maps(), e.files()} {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 0 {
				t.Errorf("%s: %d entries (%v), want an empty directory", dir, len(entries), err)
			}
		}
	})
}

// The content hash counts map files and other files; the generation written for a hash is
// the same whatever the order the maps are given in.
func TestContentHashCountsAuxiliaryFiles(t *testing.T) {
	base := Content{Config: []byte("c"), Certs: map[string][]byte{"site": []byte("k")}}
	h0 := base.Hash()
	withMap := base
	withMap.Maps = map[string][]byte{"a.map": []byte("x")}
	withFile := base
	withFile.Files = map[string][]byte{"a.map": []byte("x")}
	hm, hf := withMap.Hash(), withFile.Hash()
	if hm == h0 || hf == h0 || hm == hf {
		t.Errorf("hashes: none %s, map %s, file %s: want three different", h0, hm, hf)
	}
}

// A certificate, map or other file whose name would leave its directory is refused at staging
// (the renderer, which makes the files, refuses any name content.CheckCertName or
// CheckFileName refuses: render's tests).
func TestFileNames(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	for _, c := range []Content{
		{Config: []byte("c"), Maps: map[string][]byte{"../x.map": nil}},
		{Config: []byte("c"), Files: map[string][]byte{"..": nil}},
		{Config: []byte("c"), Certs: map[string][]byte{"a/b": nil}},
		{Config: []byte("c"), Files: map[string][]byte{"": nil}},
	} {
		if _, err := s.StageContent(c, ""); err == nil || !strings.Contains(err.Error(), "cannot be a file name") {
			t.Errorf("StageContent(%v) = %v, want a file name error", c, err)
		}
	}
}

// CheckFile points the live map and file directories, and the template ones (the Data Plane
// API hosts' storage), at the staged generation's, so that haproxy -c loads the new maps.
func TestCheckFileMapsAndFiles(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	s.SetTemplateMapsDirs("/etc/haproxy/maps")
	s.SetTemplateFilesDirs("/etc/haproxy/general", "/old/general")
	config := strings.Join([]string{
		"use_backend %[req.hdr(host),lower,map(" + e.maps() + "/hosts.map)]",
		"use_backend %[path,map_beg(/etc/haproxy/maps/paths.map,be_default)]",
		"lua-load " + e.files() + "/cors.lua",
		"errorfile 503 /etc/haproxy/general/503.http",
		"errorfile 504 /old/general/504.http",
		"crt " + e.ssl + "/site.pem",
		"keep " + e.maps() + "-backup/x /etc/haproxy/mapsx",
	}, "\n")
	g, err := s.StageContent(Content{Config: []byte(config)}, "abc")
	if err != nil {
		t.Fatal(err)
	}
	path, err := s.CheckFile(g)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"use_backend %[req.hdr(host),lower,map(" + g.MapsDir() + "/hosts.map)]",
		"use_backend %[path,map_beg(" + g.MapsDir() + "/paths.map,be_default)]",
		"lua-load " + g.FilesDir() + "/cors.lua",
		"errorfile 503 " + g.FilesDir() + "/503.http",
		"errorfile 504 " + g.FilesDir() + "/504.http",
		"crt " + g.CertDir() + "/site.pem",
		"keep " + e.maps() + "-backup/x /etc/haproxy/mapsx",
	}, "\n")
	if got := read(t, path); got != want {
		t.Errorf("check file:\n%s\nwant:\n%s", got, want)
	}
}

// The map and file directories are given or beside the config, and must differ from every
// other path.
func TestAuxiliaryDirsOptions(t *testing.T) {
	e := newEnv(t)
	maps, files := filepath.Join(e.root, "m", "maps"), filepath.Join(e.root, "f", "files")
	s, err := Open(e.config, e.ssl, "", WithMapsDir(maps), WithFilesDir(files))
	if err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, stageAux(t, s, "1"))
	if got := read(t, filepath.Join(maps, "hosts.map")) + "|" + read(t, filepath.Join(files, "page.http")); got != "map 1|page 1" {
		t.Errorf("through the given directories: %s", got)
	}
	for _, opts := range [][]Option{{WithMapsDir(e.ssl)}, {WithFilesDir(e.config)}, {WithMapsDir(maps), WithFilesDir(maps)}} {
		if _, err := Open(e.config, e.ssl, "", opts...); err == nil || !strings.Contains(err.Error(), "must differ") {
			t.Errorf("Open with clashing paths = %v", err)
		}
	}
}

// A running installation's map and file directories are adopted like its certificate
// directory: copied into the adopted generation, replaced by the symlinks, the same bytes read
// throughout; the sidecar's generations then replace them, and a rollback brings them back.
func TestAdoptsMapsAndFiles(t *testing.T) {
	e := newEnv(t)
	installation(t, e)
	if err := os.MkdirAll(filepath.Join(e.maps(), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{
		filepath.Join(e.maps(), "hosts.map"):        "their map",
		filepath.Join(e.maps(), "sub", "paths.map"): "their sub map",
		filepath.Join(e.files(), "page.http"):       "their page",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, e)
	ad := s.Adoptions()
	if len(ad) != 1 || ad[0].MapsDirFrom != e.maps() || ad[0].FilesDirFrom != e.files() || ad[0].SSLDirFrom != e.ssl {
		t.Fatalf("Adoptions = %+v", ad)
	}
	a := ad[0].Generation
	for _, p := range []string{e.maps(), e.files()} {
		if !isSymlink(t, p) {
			t.Errorf("%s is not a symlink after Open", p)
		}
	}
	for path, want := range map[string]string{
		filepath.Join(e.maps(), "hosts.map"):        "their map",
		filepath.Join(e.maps(), "sub", "paths.map"): "their sub map",
		filepath.Join(e.files(), "page.http"):       "their page",
		filepath.Join(a.MapsDir(), "hosts.map"):     "their map",
	} {
		if got := read(t, path); got != want {
			t.Errorf("%s reads %q, want %q", path, got, want)
		}
	}
	if origin := read(t, filepath.Join(a.Dir, originName)); !strings.Contains(origin, "maps-dir "+e.maps()) || !strings.Contains(origin, "files-dir "+e.files()) {
		t.Errorf("adopted-from says %q", origin)
	}
	g := stageAux(t, s, "1")
	mustActivate(t, s, g)
	if got := seenAux(t, e); got != all("1") {
		t.Fatalf("after Activate: %s", got)
	}
	if err := s.Rollback(a); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(e.maps(), "sub", "paths.map")); got != "their sub map" {
		t.Fatalf("after Rollback the map reads %q", got)
	}

	t.Run("a map directory put back by hand is kept at the next Activate", func(t *testing.T) {
		if err := os.Remove(e.maps()); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(e.maps(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.maps(), "hosts.map"), []byte("by hand"), 0o644); err != nil {
			t.Fatal(err)
		}
		mustActivate(t, s, stageAux(t, s, "2"))
		ad := s.Adoptions()
		last := ad[len(ad)-1]
		if len(ad) != 2 || last.MapsDirFrom != e.maps() || last.ConfigFrom != "" || last.SSLDirFrom != "" {
			t.Fatalf("Adoptions = %+v", ad)
		}
		if got := read(t, filepath.Join(last.Generation.MapsDir(), "hosts.map")); got != "by hand" {
			t.Errorf("kept map reads %q", got)
		}
		// The rest of that adopted generation is what was live then (the first adoption).
		if got := read(t, filepath.Join(last.Generation.FilesDir(), "page.http")); got != "their page" {
			t.Errorf("kept file reads %q", got)
		}
		if got := seenAux(t, e); got != all("2") {
			t.Fatalf("after Activate: %s", got)
		}
	})
	t.Run("a map path that is a file is an error", func(t *testing.T) {
		e := newEnv(t)
		if err := os.MkdirAll(filepath.Dir(e.maps()), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.maps(), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(e.config, e.ssl, ""); err == nil || !strings.Contains(err.Error(), "map file directory") {
			t.Fatalf("Open = %v", err)
		}
	})
}

// An adopted generation made before map and file directories existed keeps its hash: a
// restarted sidecar finds and reuses it rather than adopting the same files again.
func TestAdoptedHashWithoutAuxiliaryFiles(t *testing.T) {
	certs := []treeEntry{{rel: "site.pem", mode: 0o600, data: []byte("k")}, {rel: "sub", dir: true, mode: 0o700}}
	got := adoptedHash([]byte("c"), true, map[string][]treeEntry{CertDirName: certs, MapsDirName: nil})
	// The hash as it was computed before: the config, then the certificate entries in order.
	h := sha256.New()
	fmt.Fprintf(h, "config %d\n", 1)
	h.Write([]byte("c"))
	fmt.Fprintf(h, "file %q %o %d\n", "site.pem", 0o600, 1)
	h.Write([]byte("k"))
	fmt.Fprintf(h, "dir %q %o\n", "sub", 0o700)
	if want := AdoptedPrefix + hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("adopted hash %s, before map directories it was %s", got, want)
	}
	if adoptedHash([]byte("c"), true, map[string][]treeEntry{CertDirName: certs, MapsDirName: certs}) == got {
		t.Error("adopted maps do not change the hash")
	}
}
