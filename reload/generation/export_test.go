package generation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestExport: a generation's files copied as plain files, with a generation's modes; a second
// export replaces them.
func TestExport(t *testing.T) {
	s := open(t, newEnv(t))
	out := t.TempDir()
	to := ExportPaths{Config: filepath.Join(out, "haproxy.cfg"), SSLDir: filepath.Join(out, "certs"),
		MapsDir: filepath.Join(out, "maps"), FilesDir: filepath.Join(out, "files")}
	for _, v := range []string{"1", "2"} {
		g, err := s.StageContent(Content{Config: []byte("config " + v), Certs: map[string][]byte{"site": []byte("pem " + v)},
			Maps: map[string][]byte{"hosts.map": []byte("map " + v)}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := Export(g, to); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{to.Config: "config " + v, filepath.Join(to.SSLDir, "site.pem"): "pem " + v,
			filepath.Join(to.MapsDir, "hosts.map"): "map " + v} {
			if got := read(t, path); got != want {
				t.Errorf("%s reads %q, want %q", path, got, want)
			}
			if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v %v, want a plain file, mode 0600", path, fi.Mode(), err)
			}
		}
		if _, err := os.Stat(to.FilesDir); !os.IsNotExist(err) {
			t.Errorf("an empty files directory was made (%v)", err)
		}
	}
	if fi, err := os.Stat(to.SSLDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("certificate directory %v %v, want 0700", fi.Mode(), err)
	}
}

// TestExportsAtOnce: exports into the same directories at once all succeed (no fixed
// temporary name they would write over, or rename from under each other); the files are one
// export's whole, and no temporary file is left.
func TestExportsAtOnce(t *testing.T) {
	s := open(t, newEnv(t))
	out := t.TempDir()
	to := ExportPaths{Config: filepath.Join(out, "haproxy.cfg"), SSLDir: filepath.Join(out, "certs"),
		MapsDir: filepath.Join(out, "maps"), FilesDir: filepath.Join(out, "files")}
	var gens []*Generation
	for i := range 8 {
		g, err := s.StageContent(Content{Config: []byte(fmt.Sprint("config ", i)), Certs: map[string][]byte{"api": []byte(fmt.Sprint("pem ", i))}}, "")
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(gens))
	for i, g := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := Export(g, to); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("export %d: %v", i, err)
		}
	}
	if got := read(t, filepath.Join(to.SSLDir, "api.pem")); !strings.HasPrefix(got, "pem ") {
		t.Errorf("api.pem reads %q", got)
	}
	for _, dir := range []string{out, to.SSLDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				t.Errorf("temporary file %s left in %s", e.Name(), dir)
			}
		}
	}
}

// TestReadTheLiveGeneration: what a state directory has live reads back as it was staged.
func TestReadTheLiveGeneration(t *testing.T) {
	s := open(t, newEnv(t))
	c := Content{Config: []byte("config"), Certs: map[string][]byte{"site": []byte("pem")}, Maps: map[string][]byte{"hosts.map": []byte("a b\n")}}
	g, err := s.StageContent(c, "")
	if err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, g)
	live, err := LiveIn(s.StateDir())
	if err != nil || live.Dir != g.Dir || live.Hash != c.Hash() {
		t.Fatalf("LiveIn = %+v, %v; want %+v", live, err, g)
	}
	got, err := Read(live)
	if err != nil || got.Hash() != c.Hash() || string(got.Certs["site"]) != "pem" {
		t.Fatalf("Read = %+v, %v", got, err)
	}
}
