package generation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

type env struct {
	root, config, ssl string
}

func newEnv(t *testing.T) env {
	t.Helper()
	root := t.TempDir()
	return env{root: root, config: filepath.Join(root, "etc", "haproxy.cfg"), ssl: filepath.Join(root, "etc", "ssl")}
}

func open(t *testing.T, e env) *Store {
	t.Helper()
	s, err := Open(e.config, e.ssl, "")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func stage(t *testing.T, s *Store, config, cert string) *Generation {
	t.Helper()
	g, err := s.Stage([]byte(config), map[string][]byte{"site": []byte(cert)}, "")
	if err != nil {
		t.Fatalf("Stage: %v", err)
	}
	return g
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// seen returns what HAProxy would read through the stable paths.
func seen(t *testing.T, e env) (config, cert string) {
	t.Helper()
	return read(t, e.config), read(t, filepath.Join(e.ssl, "site.pem"))
}

func TestStageLeavesLiveUntouched(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	if s.Live() != nil {
		t.Fatal("fresh store has a live generation")
	}
	g1 := stage(t, s, "config 1", "cert 1")
	if _, err := os.Lstat(e.config); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging created %s (%v)", e.config, err)
	}
	if err := s.Activate(g1); err != nil {
		t.Fatal(err)
	}
	g2 := stage(t, s, "config 2", "cert 2")
	if c, k := seen(t, e); c != "config 1" || k != "cert 1" {
		t.Fatalf("after staging g2, live is %q/%q", c, k)
	}
	if s.Live().Dir != g1.Dir {
		t.Fatalf("Live = %s, want %s", s.Live().Dir, g1.Dir)
	}
	if read(t, g2.ConfigFile()) != "config 2" || read(t, filepath.Join(g2.CertDir(), "site.pem")) != "cert 2" {
		t.Fatal("staged files have the wrong content")
	}
	if g2.Seq <= g1.Seq {
		t.Fatalf("seq %d after %d", g2.Seq, g1.Seq)
	}
	if !strings.HasPrefix(filepath.Base(g2.Dir), fmt.Sprintf("gen-%d-", g2.Seq)) || len(g2.Hash) != 64 {
		t.Fatalf("generation %s hash %q", g2.Dir, g2.Hash)
	}
}

func TestActivateSwapsConfigAndCertsTogether(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	g1 := stage(t, s, "config 1", "cert 1")
	g2 := stage(t, s, "config 2", "cert 2")
	for _, step := range []struct {
		g          *Generation
		cfg, cert  string
		wantTarget string
	}{{g1, "config 1", "cert 1", filepath.Base(g1.Dir)}, {g2, "config 2", "cert 2", filepath.Base(g2.Dir)}} {
		if err := s.Activate(step.g); err != nil {
			t.Fatal(err)
		}
		if c, k := seen(t, e); c != step.cfg || k != step.cert {
			t.Fatalf("after Activate(%s): %q/%q", step.g.Dir, c, k)
		}
		target, err := os.Readlink(filepath.Join(s.StateDir(), CurrentName))
		if err != nil || target != step.wantTarget {
			t.Fatalf("current -> %q (%v), want %q", target, err, step.wantTarget)
		}
	}
	for path, want := range map[string]string{
		e.config: filepath.Join(DefaultStateDirName, CurrentName, ConfigName),
		e.ssl:    filepath.Join(DefaultStateDirName, CurrentName, CertDirName),
	} {
		got, err := os.Readlink(path)
		if err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", path, got, err, want)
		}
	}
	// No temporary symlink is left behind.
	for _, dir := range []string{s.StateDir(), filepath.Dir(e.config)} {
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			if strings.HasPrefix(en.Name(), tmpPrefix) {
				t.Errorf("leftover %s in %s", en.Name(), dir)
			}
		}
	}
}

func TestRollback(t *testing.T) {
	t.Run("to previous when none marked good", func(t *testing.T) {
		e := newEnv(t)
		s := open(t, e)
		if err := s.Rollback(nil); !errors.Is(err, ErrNoRollback) {
			t.Fatalf("Rollback on empty store = %v", err)
		}
		g1, g2 := stage(t, s, "config 1", "cert 1"), stage(t, s, "config 2", "cert 2")
		mustActivate(t, s, g1)
		mustActivate(t, s, g2)
		if err := s.Rollback(nil); err != nil {
			t.Fatal(err)
		}
		if c, k := seen(t, e); c != "config 1" || k != "cert 1" {
			t.Fatalf("after Rollback: %q/%q", c, k)
		}
		if s.Live().Dir != g1.Dir {
			t.Fatalf("Live = %s", s.Live().Dir)
		}
		// The failed generation is forgotten: a second Rollback has nothing to go back to.
		if err := s.Rollback(nil); !errors.Is(err, ErrNoRollback) {
			t.Fatalf("second Rollback = %v, want ErrNoRollback", err)
		}
	})
	t.Run("to last good across unconfirmed activations", func(t *testing.T) {
		e := newEnv(t)
		s := open(t, e)
		g1, g2, g3 := stage(t, s, "config 1", "cert 1"), stage(t, s, "config 2", "cert 2"), stage(t, s, "config 3", "cert 3")
		mustActivate(t, s, g1) // HAProxy loaded it: the good one
		mustActivate(t, s, g2) // never confirmed
		mustActivate(t, s, g3)
		if err := s.Rollback(g1); err != nil {
			t.Fatal(err)
		}
		if c, k := seen(t, e); c != "config 1" || k != "cert 1" {
			t.Fatalf("after Rollback: %q/%q", c, k)
		}
		if s.Live().Dir != g1.Dir {
			t.Fatalf("Live = %s", s.Live().Dir)
		}
	})
}

func mustActivate(t *testing.T, s *Store, g *Generation) {
	t.Helper()
	if err := s.Activate(g); err != nil {
		t.Fatalf("Activate(%s): %v", g.Dir, err)
	}
}

func names(t *testing.T, s *Store) []string {
	t.Helper()
	gens, err := s.Generations()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range gens {
		out = append(out, filepath.Base(g.Dir))
	}
	return out
}

func TestPruneKeepsLiveAndLastGood(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	var gens []*Generation
	for i := range 6 {
		gens = append(gens, stage(t, s, fmt.Sprintf("config %d", i), fmt.Sprintf("cert %d", i)))
	}
	mustActivate(t, s, gens[0])
	mustActivate(t, s, gens[1]) // the last good one
	mustActivate(t, s, gens[2]) // live, not confirmed yet
	// gens[3], gens[4] staged and superseded; gens[5] the newest staged, not activated.
	if _, err := s.CheckFile(gens[5]); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(s.StateDir(), tmpPrefix+"gen-crashed"), 0o700)
	if err := s.Prune(gens[1]); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Base(gens[1].Dir), filepath.Base(gens[2].Dir), filepath.Base(gens[5].Dir)}
	if got := names(t, s); !equal(got, want) {
		t.Fatalf("after Prune: %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(s.StateDir(), tmpPrefix+"gen-crashed")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary directory survived Prune: %v", err)
	}
	if c, _ := seen(t, e); c != "config 2" {
		t.Fatalf("live changed by Prune: %q", c)
	}
	// Once the newest is activated and good, everything else goes.
	mustActivate(t, s, gens[5])
	if err := s.Prune(gens[5]); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s); !equal(got, []string{filepath.Base(gens[5].Dir)}) {
		t.Fatalf("after second Prune: %v", got)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

func TestReopenFindsLive(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	g1 := stage(t, s, "config 1", "cert 1")
	g2 := stage(t, s, "config 2", "cert 2")
	mustActivate(t, s, g1)
	mustActivate(t, s, g2)

	s2 := open(t, e)
	live := s2.Live()
	if live == nil || live.Dir != g2.Dir || live.Seq != g2.Seq || live.Hash != g2.Hash {
		t.Fatalf("reopened Live = %+v, want %+v", live, g2)
	}
	g3 := stage(t, s2, "config 3", "cert 3")
	if g3.Seq <= g2.Seq {
		t.Fatalf("seq after reopen %d, want > %d", g3.Seq, g2.Seq)
	}
	mustActivate(t, s2, g3)
	if err := s2.Rollback(live); err != nil { // the live generation at Open is the good one
		t.Fatal(err)
	}
	if c, _ := seen(t, e); c != "config 2" {
		t.Fatalf("rollback after reopen: %q", c)
	}
}

func TestReplacesPreexistingFiles(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.ssl, 0o755); err != nil { // an empty directory is replaced
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte("hand-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, e)
	if read(t, e.config) != "hand-written" {
		t.Fatal("Open touched the existing config before any generation")
	}
	g := stage(t, s, "config 1", "cert 1")
	mustActivate(t, s, g)
	if c, k := seen(t, e); c != "config 1" || k != "cert 1" {
		t.Fatalf("after Activate: %q/%q", c, k)
	}
	for _, p := range []string{e.config, e.ssl} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink (%v)", p, err)
		}
	}

}

func TestModes(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	g := stage(t, s, "config", "cert")
	for path, want := range map[string]os.FileMode{
		g.CertDir():                            0o700,
		filepath.Join(g.CertDir(), "site.pem"): 0o600,
		g.ConfigFile():                         0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// A certificate name that would leave the certificate directory is refused (the renderer refuses
// any that content.CheckCertName refuses before: render's tests).
func TestCertNames(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	for _, name := range []string{"", "a/b", "..", ".", "../x", "a\x00b", `a\b`} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			_, err := s.Stage([]byte("c"), map[string][]byte{name: []byte("k")}, "")
			if err == nil || !strings.Contains(err.Error(), "cannot be a file name") {
				t.Fatalf("Stage with name %q = %v", name, err)
			}
		})
	}
	if _, err := s.Stage([]byte("c"), map[string][]byte{"example.com": []byte("k"), "wild_card-1": []byte("k")}, ""); err != nil {
		t.Fatalf("valid names rejected: %v", err)
	}
	if _, err := s.Stage([]byte("c"), nil, "../../etc"); err == nil {
		t.Fatal("a hash with a path in it was accepted")
	}
	entries, _ := os.ReadDir(s.StateDir())
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), tmpPrefix) {
			t.Errorf("failed Stage left %s", en.Name())
		}
	}
}

func TestCheckFile(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	ssl := s.SSLDir()
	config := strings.Join([]string{
		"bind :443 ssl crt " + ssl + "/site.pem crt " + ssl,
		"bind :444 ssl crt '" + ssl + "/other.pem'",
		"crt-list " + ssl + "2/list.txt",       // another directory that shares the prefix
		"errorfile 503 /x" + ssl + "/503.http", // the path inside another path
		"ca-file " + ssl + ".pem",              // a file beside the directory
		"",
	}, "\n")
	g, err := s.Stage([]byte(config), map[string][]byte{"site": []byte("k")}, "abc")
	if err != nil {
		t.Fatal(err)
	}
	path, err := s.CheckFile(g)
	if err != nil {
		t.Fatal(err)
	}
	cd := g.CertDir()
	want := strings.Join([]string{
		"bind :443 ssl crt " + cd + "/site.pem crt " + cd,
		"bind :444 ssl crt '" + cd + "/other.pem'",
		"crt-list " + ssl + "2/list.txt",
		"errorfile 503 /x" + ssl + "/503.http",
		"ca-file " + ssl + ".pem",
		"",
	}, "\n")
	if got := read(t, path); got != want {
		t.Fatalf("check file:\n%s\nwant:\n%s", got, want)
	}
	if read(t, g.ConfigFile()) != config {
		t.Fatal("CheckFile changed the generation's config")
	}
	if _, err := s.CheckFile(g); err != nil {
		t.Fatalf("second CheckFile: %v", err)
	}
}

// A reader looping on the stable paths during many activations only ever sees complete
// versions.
func TestConcurrentReaderSeesCompleteFiles(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	versions := make([][]byte, 3)
	certs := make([][]byte, 3)
	for i := range versions {
		versions[i] = bytes.Repeat([]byte(fmt.Sprintf("config version %d\n", i)), 4096)
		certs[i] = bytes.Repeat([]byte(fmt.Sprintf("cert version %d\n", i)), 1024)
	}
	first, err := s.Stage(versions[0], map[string][]byte{"site": certs[0]}, "")
	if err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, first)

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	check := func(path string, valid [][]byte) {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(path)
			if err != nil {
				errs <- fmt.Errorf("read %s: %w", path, err)
				return
			}
			ok := false
			for _, v := range valid {
				ok = ok || bytes.Equal(b, v)
			}
			if !ok {
				errs <- fmt.Errorf("read %s: %d bytes that are no complete version", path, len(b))
				return
			}
			reads.Add(1)
		}
	}
	wg.Add(2)
	go check(e.config, versions)
	go check(filepath.Join(e.ssl, "site.pem"), certs)
	for i := 1; i <= 200; i++ {
		v := i % len(versions)
		g, err := s.Stage(versions[v], map[string][]byte{"site": certs[v]}, "")
		if err != nil {
			t.Fatal(err)
		}
		mustActivate(t, s, g)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the readers never read")
	}
	t.Logf("%d complete reads during 200 activations", reads.Load())
}

// With a template SSL directory (the Data Plane API's remote storage directory), the check
// file points both it and SSLDir at the generation's certificates; other paths are kept.
func TestCheckFileTemplateSSLDir(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	ssl := s.SSLDir()
	const remote = "/etc/haproxy/ssl"
	config := strings.Join([]string{
		"bind :443 ssl crt " + remote + "/site.pem crt " + remote,
		"bind :444 ssl crt " + ssl + "/site.pem",
		"bind :445 ssl crt " + remote + "2/other.pem",  // shares the prefix only
		"errorfile 503 /srv" + remote + "/503.http",    // inside another path
		"ca-file " + remote + "/ca/" + remote + ".pem", // nested: replaced once at the start
		"",
	}, "\n")
	g, err := s.Stage([]byte(config), map[string][]byte{"site": []byte("k")}, "abc")
	if err != nil {
		t.Fatal(err)
	}
	cd := g.CertDir()
	t.Run("unset", func(t *testing.T) {
		path, err := s.CheckFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); strings.Contains(got, cd+"/site.pem crt") || !strings.Contains(got, ":444 ssl crt "+cd+"/site.pem") {
			t.Fatalf("without a template SSL directory:\n%s", got)
		}
	})
	t.Run("set", func(t *testing.T) {
		s.SetTemplateSSLDir(remote + "/")
		if s.TemplateSSLDir() != remote {
			t.Fatalf("TemplateSSLDir = %q", s.TemplateSSLDir())
		}
		path, err := s.CheckFile(g)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{
			"bind :443 ssl crt " + cd + "/site.pem crt " + cd,
			"bind :444 ssl crt " + cd + "/site.pem",
			"bind :445 ssl crt " + remote + "2/other.pem",
			"errorfile 503 /srv" + remote + "/503.http",
			"ca-file " + cd + "/ca/" + remote + ".pem",
			"",
		}, "\n")
		if got := read(t, path); got != want {
			t.Fatalf("check file:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("nested directories: the longest wins", func(t *testing.T) {
		s.SetTemplateSSLDir(filepath.Dir(ssl)) // the parent of the local SSLDir
		path, err := s.CheckFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); !strings.Contains(got, ":444 ssl crt "+cd+"/site.pem\n") {
			t.Fatalf("the local SSLDir inside the template one was not replaced whole:\n%s", got)
		}
	})
	t.Run("cleared", func(t *testing.T) {
		s.SetTemplateSSLDir("")
		path, err := s.CheckFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); !strings.Contains(got, "crt "+remote+"/site.pem") {
			t.Fatalf("after clearing, the remote directory was still replaced:\n%s", got)
		}
	})
}

// TestLoaded: what HAProxy runs is recorded across runs of the sidecar, survives pruning, and
// can be forgotten.
func TestLoaded(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	if l, ok := s.Loaded(); ok {
		t.Fatalf("Loaded in a new store = %+v", l)
	}
	want := Loaded{Hash: "abc123", LoadID: "master 42 reload 3"}
	if err := s.SetLoaded(want); err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, stage(t, s, "config 1", "cert 1"))
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if l, ok := open(t, e).Loaded(); !ok || l != want {
		t.Fatalf("Loaded after reopening = %+v, %v; want %+v", l, ok, want)
	}
	if err := s.SetLoaded(Loaded{Hash: "x\ny", LoadID: "id"}); err == nil {
		t.Error("a hash with a newline was recorded")
	}
	if err := s.SetLoaded(Loaded{}); err != nil {
		t.Fatal(err)
	}
	if l, ok := s.Loaded(); ok {
		t.Fatalf("Loaded after forgetting = %+v", l)
	}
	if err := s.SetLoaded(Loaded{}); err != nil {
		t.Errorf("forgetting twice: %v", err)
	}
}

// TestLoadedBegunLaterWins: changes of the record land in the order they were begun, whatever
// the order their synced writes finish in; a removal is done when begun and no write begun
// before it brings the record back.
func TestLoadedBegunLaterWins(t *testing.T) {
	s := open(t, newEnv(t))
	a, b := Loaded{Hash: "a", LoadID: "L1"}, Loaded{Hash: "b", LoadID: "L1"}
	begin := func(l Loaded) func() error {
		t.Helper()
		finish, err := s.BeginLoaded(l)
		if err != nil {
			t.Fatal(err)
		}
		return finish
	}
	record := func() Loaded { l, _ := s.Loaded(); return l }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	fa, fb := begin(a), begin(b)
	must(fb())
	must(fa())
	if got := record(); got != b {
		t.Errorf("a finished last over b begun after it: %+v", got)
	}

	fa, fb = begin(a), begin(b)
	must(fa())
	if got := record(); got != b {
		t.Errorf("a superseded by b before it finished was written: %+v", got)
	}
	must(fb())
	if got := record(); got != b {
		t.Errorf("record = %+v, want b", got)
	}

	fa = begin(a)
	begin(Loaded{}) // forgotten at once
	if got, ok := s.Loaded(); ok {
		t.Errorf("record after forgetting = %+v", got)
	}
	must(fa())
	if got, ok := s.Loaded(); ok {
		t.Errorf("a write begun before the removal brought the record back: %+v", got)
	}
	must(begin(a)())
	if got := record(); got != a {
		t.Errorf("record = %+v, want a", got)
	}
	if entries, _ := os.ReadDir(s.StateDir()); len(entries) != 1 {
		t.Errorf("the dropped writes left files: %v", entries)
	}
}

// TestRecordDir: with WithRecordDir the record lives there, never in the state directory; a
// record a run before the option left in the state directory is moved there at Open; the
// record directory cannot be one of HAProxy's directories.
func TestRecordDir(t *testing.T) {
	e := newEnv(t)
	want := Loaded{Hash: "abc123", LoadID: "master 42 reload 3"}
	if err := open(t, e).SetLoaded(want); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(t.TempDir(), "run", "haproxy-sidecar")
	s, err := Open(e.config, e.ssl, "", WithRecordDir(records))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := s.Loaded(); !ok || l != want {
		t.Fatalf("Loaded after the record directory was set = %+v, %v; want the one left in the state directory", l, ok)
	}
	if _, err := os.Stat(filepath.Join(s.StateDir(), "loaded")); !os.IsNotExist(err) {
		t.Errorf("the record is still in the state directory: %v", err)
	}
	next := Loaded{Hash: "def456", LoadID: "master 42 reload 3"}
	if err := s.SetLoaded(next); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(records, "loaded")); err != nil || string(b) != "def456\nmaster 42 reload 3\n" {
		t.Errorf("the record directory holds %q, %v", b, err)
	}
	mustActivate(t, s, stage(t, s, "config 1", "cert 1"))
	if err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if l, ok := open(t, e).Loaded(); ok {
		t.Errorf("the state directory has a record again: %+v", l)
	}
	if _, err := Open(e.config, e.ssl, "", WithRecordDir(records)); err != nil {
		t.Fatal(err)
	}
	if l, ok := s.Loaded(); !ok || l != next {
		t.Errorf("Loaded after reopening = %+v, %v; want %+v", l, ok, next)
	}
	if _, err := Open(e.config, e.ssl, "", WithRecordDir(e.ssl)); err == nil || !strings.Contains(err.Error(), "record directory") {
		t.Errorf("the SSL directory as the record directory: %v", err)
	}
}

// TestPruneLeavesStateBeingWritten: state files (the record, the inputs) are written outside
// the writer's lock: a Prune while one is written leaves it be; what a crash left half written
// goes when the store opens next.
func TestPruneLeavesStateBeingWritten(t *testing.T) {
	e := newEnv(t)
	s := open(t, e)
	mustActivate(t, s, stage(t, s, "config 1", "cert 1"))
	err := s.WriteStateFrom("inputs.json", func(w io.Writer) error {
		if err := s.Prune(); err != nil {
			return err
		}
		_, err := io.WriteString(w, "{}")
		return err
	})
	if err != nil {
		t.Fatalf("a state file written while Prune ran: %v", err)
	}
	if b, err := s.ReadState("inputs.json"); err != nil || string(b) != "{}" {
		t.Errorf("the state file holds %q, %v", b, err)
	}
	crashed := filepath.Join(s.StateDir(), stateTmpPrefix+"inputs.json123")
	if err := os.WriteFile(crashed, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, e)
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("a state file a crash left half written is still there: %v", err)
	}
}

// TestDiscard: a refused staged generation goes, and nothing else; the live one never does.
func TestDiscard(t *testing.T) {
	s := open(t, newEnv(t))
	g1, g2, g3 := stage(t, s, "config 1", "cert 1"), stage(t, s, "config 2", "cert 2"), stage(t, s, "config 3", "cert 3")
	mustActivate(t, s, g1)
	if err := s.Discard(g2); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(g1); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Base(g1.Dir), filepath.Base(g3.Dir)}
	if got := names(t, s); !equal(got, want) {
		t.Fatalf("after Discard: %v, want %v", got, want)
	}
}
