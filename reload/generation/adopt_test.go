package generation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// installation writes what a running HAProxy has before the sidecar arrives: its own
// haproxy.cfg, and a certificate directory with a file, a subdirectory and a symlink.
func installation(t *testing.T, e env) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(e.ssl, "extra"), 0o750); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{
		e.config:                                "their config",
		filepath.Join(e.ssl, "site.pem"):        "their cert",
		filepath.Join(e.ssl, "extra", "a.pem"):  "their extra cert",
		filepath.Join(e.root, "elsewhere.pem"):  "linked cert",
		filepath.Join(e.root, "unrelated.file"): "not adopted",
	} {
		if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(e.root, "elsewhere.pem"), filepath.Join(e.ssl, "linked.pem")); err != nil {
		t.Fatal(err)
	}
}

func isSymlink(t *testing.T, path string) bool {
	t.Helper()
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// A running installation's files are kept as the adopted generation, which is live and good,
// and the stable paths become the symlinks, reading the same bytes.
func TestAdoptsRunningInstallation(t *testing.T) {
	e := newEnv(t)
	installation(t, e)
	s := open(t, e)

	ad := s.Adoptions()
	if len(ad) != 1 {
		t.Fatalf("Adoptions = %+v, want one", ad)
	}
	a := ad[0]
	if a.ConfigFrom != e.config || a.SSLDirFrom != e.ssl || a.Reused || !a.Generation.IsAdopted() {
		t.Fatalf("adoption %+v", a)
	}
	if !strings.Contains(filepath.Base(a.Generation.Dir), "-adopted-") {
		t.Errorf("adopted generation %s is not named as such", a.Generation.Dir)
	}
	if live := s.Live(); live == nil || live.Dir != a.Generation.Dir {
		t.Fatalf("Live %+v, want the adopted generation", live)
	}
	for _, p := range []string{e.config, e.ssl} {
		if !isSymlink(t, p) {
			t.Errorf("%s is not a symlink after Open", p)
		}
	}
	for path, want := range map[string]string{
		e.config:                                          "their config",
		filepath.Join(e.ssl, "site.pem"):                  "their cert",
		filepath.Join(e.ssl, "extra", "a.pem"):            "their extra cert",
		filepath.Join(e.ssl, "linked.pem"):                "linked cert",
		a.Generation.ConfigFile():                         "their config",
		filepath.Join(a.Generation.CertDir(), "site.pem"): "their cert",
	} {
		if got := read(t, path); got != want {
			t.Errorf("%s reads %q, want %q", path, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(a.Generation.CertDir(), "site.pem")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("adopted file mode %v (%v), want the original 0640", fi.Mode().Perm(), err)
	}
	if origin := read(t, filepath.Join(a.Generation.Dir, originName)); !strings.Contains(origin, e.config) || !strings.Contains(origin, e.ssl) {
		t.Errorf("adopted-from says %q", origin)
	}
	if read(t, filepath.Join(e.root, "elsewhere.pem")) != "linked cert" || read(t, filepath.Join(e.root, "unrelated.file")) != "not adopted" {
		t.Error("files outside the stable paths were touched")
	}

	t.Run("the sidecar's own generation replaces it; a rollback returns to it", func(t *testing.T) {
		g := stage(t, s, "config 1", "cert 1")
		mustActivate(t, s, g)
		if c, k := seen(t, e); c != "config 1" || k != "cert 1" {
			t.Fatalf("after Activate: %q/%q", c, k)
		}
		if len(s.Adoptions()) != 1 {
			t.Fatalf("Activate adopted again: %+v", s.Adoptions())
		}
		if err := s.Rollback(a.Generation); err != nil {
			t.Fatal(err)
		}
		if c, k := seen(t, e); c != "their config" || k != "their cert" {
			t.Fatalf("after Rollback: %q/%q, want the adopted files", c, k)
		}
	})

	t.Run("never pruned", func(t *testing.T) {
		g := stage(t, s, "config 2", "cert 2")
		mustActivate(t, s, g)
		if err := s.Prune(g); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.Generation.ConfigFile()); err != nil {
			t.Fatalf("Prune deleted the adopted generation: %v", err)
		}
		if got := names(t, s); len(got) != 2 {
			t.Fatalf("after Prune: %v, want the adopted and the live generation", got)
		}
	})

	t.Run("reopened: nothing adopted again", func(t *testing.T) {
		s2 := open(t, e)
		if len(s2.Adoptions()) != 0 {
			t.Fatalf("a reopened store adopted %+v", s2.Adoptions())
		}
		if c, _ := seen(t, e); c != "config 2" {
			t.Fatalf("reopened store serves %q", c)
		}
	})
}

// Only a configuration file (no certificate directory): adopted alone; an empty directory
// holds nothing worth keeping and is replaced.
func TestAdoptsConfigOnly(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.ssl, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte("their config"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, e)
	a := s.Adoptions()
	if len(a) != 1 || a[0].ConfigFrom != e.config || a[0].SSLDirFrom != "" {
		t.Fatalf("Adoptions = %+v", a)
	}
	if read(t, e.config) != "their config" || !isSymlink(t, e.ssl) {
		t.Fatalf("config %q, ssl symlink %v", read(t, e.config), isSymlink(t, e.ssl))
	}
}

// Nothing at the stable paths: nothing adopted, nothing created before the first Activate.
func TestFreshInstallationAdoptsNothing(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	if len(s.Adoptions()) != 0 || s.Live() != nil {
		t.Fatalf("Adoptions %+v, Live %+v", s.Adoptions(), s.Live())
	}
	if _, err := os.Lstat(e.config); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open created %s: %v", e.config, err)
	}
}

// A file put back by hand at the configuration path while the sidecar runs (a package
// upgrade, an operator) is kept at the next Activate, with the live certificates beside it.
func TestAdoptsFileReplacedByHand(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	mustActivate(t, s, stage(t, s, "config 1", "cert 1"))
	if err := os.Remove(e.config); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte("by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, stage(t, s, "config 2", "cert 2"))
	if c, k := seen(t, e); c != "config 2" || k != "cert 2" {
		t.Fatalf("after Activate: %q/%q", c, k)
	}
	a := s.Adoptions()
	if len(a) != 1 || a[0].ConfigFrom != e.config || a[0].SSLDirFrom != "" {
		t.Fatalf("Adoptions = %+v", a)
	}
	if got := read(t, a[0].Generation.ConfigFile()); got != "by hand" {
		t.Errorf("adopted config %q", got)
	}
	if got := read(t, filepath.Join(a[0].Generation.CertDir(), "site.pem")); got != "cert 1" {
		t.Errorf("adopted certificate %q, want the live one beside the hand-written config", got)
	}
}

// The same files found twice (a crash between keeping them and swapping the paths) are kept
// once.
func TestAdoptionReusesIdenticalGeneration(t *testing.T) {
	e := newEnv(t)
	installation(t, e)
	s := open(t, e)
	first := s.Adoptions()[0].Generation
	// The crash: the paths hold the original files again.
	for _, p := range []string{e.config, e.ssl} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	installation(t, e)
	s2 := open(t, e)
	a := s2.Adoptions()
	if len(a) != 1 || !a[0].Reused || a[0].Generation.Dir != first.Dir {
		t.Fatalf("Adoptions = %+v, want the first adopted generation reused", a)
	}
}

// HAProxy reading the stable paths while Open swaps them finds a complete file every time:
// the directory is exchanged with its symlink in one rename.
func TestAdoptionSwapIsAtomic(t *testing.T) {
	for i := 0; i < 20; i++ {
		e := newEnv(t)
		installation(t, e)
		var stop atomic.Bool
		var wg sync.WaitGroup
		var failures atomic.Int64
		var firstErr atomic.Value
		for _, path := range []string{e.config, filepath.Join(e.ssl, "site.pem")} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					if _, err := os.ReadFile(path); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		open(t, e)
		stop.Store(true)
		wg.Wait()
		if n := failures.Load(); n > 0 {
			t.Fatalf("%d reads failed during the swap, first: %v", n, firstErr.Load())
		}
	}
}

// A configuration path that is a directory is an error that says so, and nothing is touched.
func TestAdoptionRefusesDirectoryAsConfig(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.config, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(e.config, e.ssl, ""); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("Open = %v, want an error saying the configuration path is a directory", err)
	}
}
