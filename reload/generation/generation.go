// Package generation keeps the files HAProxy reads as complete, immutable on-disk generations
// and switches between them with one atomic rename, in the spirit of Kubernetes'
// pkg/volume/util/atomic_writer.go.
//
// Layout:
//
//	StateDir/gen-<seq>-<hash12>/haproxy.cfg
//	StateDir/gen-<seq>-<hash12>/certs/<name>.pem   (0600; certs dir 0700)
//	StateDir/gen-<seq>-<hash12>/maps/<name>        (0600; maps dir 0700)
//	StateDir/gen-<seq>-<hash12>/files/<name>       (0600; files dir 0700)
//	StateDir/current -> gen-...                     (relative symlink, swapped by rename)
//	ConfigPath       -> StateDir/current/haproxy.cfg
//	SSLDir           -> StateDir/current/certs
//	MapsDir          -> StateDir/current/maps
//	FilesDir         -> StateDir/current/files
//
// ConfigPath, SSLDir, MapsDir and FilesDir are stable symlinks, created once; the
// configuration, its certificates, map files and other files change together when `current`
// is renamed over, so HAProxy never sees a half-written file or a configuration with another
// generation's certificates or maps.
//
// Files already at the stable paths that the store did not put there (a running HAProxy
// taken over: its own haproxy.cfg, certificate and map directories) are never deleted: they are
// copied into an adopted generation (gen-<seq>-adopted-<hash4>, never pruned), which becomes
// the live generation, and the paths are then replaced by the symlinks with
// atomic renames (a directory is exchanged with its symlink in one rename where Linux
// supports it), so HAProxy reads the same bytes throughout.
package generation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
)

// File and directory names inside StateDir and a generation.
const (
	ConfigName  = "haproxy.cfg"
	CertDirName = "certs"
	MapsDirName = "maps"
	// FilesDirName holds the other auxiliary files (Lua scripts, error pages, ...).
	FilesDirName = "files"
	CurrentName  = "current"
	hashName     = "hash"
	checkName    = "check.cfg"
	tmpPrefix    = ".tmp-"
	// stateTmpPrefix names a state file being written (WriteState, the record): written
	// outside Writer's lock, so Prune leaves them; Open removes what a crash left.
	stateTmpPrefix = ".state-tmp-"
	genPrefix      = "gen-"
	// DefaultStateDirName is the state directory's name beside ConfigPath when none is given.
	DefaultStateDirName = ".haproxy-sidecar"
)

// File modes. The configuration may hold the stats password; certificates hold private keys.
const (
	genDirMode  os.FileMode = 0o755
	configMode  os.FileMode = 0o600
	certDirMode os.FileMode = 0o700
	certMode    os.FileMode = 0o600
	// Map files and other files are rendered from templates that may print secrets (env):
	// the same modes as the certificates.
	auxDirMode os.FileMode = 0o700
	auxMode    os.FileMode = 0o600
)

// ErrNoRollback is returned by Rollback when no generation is known to roll back to.
var ErrNoRollback = errors.New("no generation to roll back to")

var (
	genName   = regexp.MustCompile(`^gen-(\d+)-([A-Za-z0-9_-]{1,12})$`)
	hashChars = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Generation is one complete set of files on disk. It is never modified once staged.
type Generation struct {
	Dir  string // absolute path of gen-<seq>-<hash12>
	Hash string // the content hash given to Stage
	Seq  int
	// Secret are the lines of its files that hold a secret (see content.SecretLines), when
	// it was staged from a rendering: no message about it quotes them.
	Secret content.SecretLines
}

// ConfigFile is the generation's haproxy.cfg.
func (g *Generation) ConfigFile() string { return filepath.Join(g.Dir, ConfigName) }

// CertDir is the generation's certificate directory.
func (g *Generation) CertDir() string { return filepath.Join(g.Dir, CertDirName) }

// MapsDir is the generation's map file directory.
func (g *Generation) MapsDir() string { return filepath.Join(g.Dir, MapsDirName) }

// FilesDir is the generation's directory of other files.
func (g *Generation) FilesDir() string { return filepath.Join(g.Dir, FilesDirName) }

func (g *Generation) name() string { return filepath.Base(g.Dir) }

func (g *Generation) same(o *Generation) bool { return g != nil && o != nil && g.Dir == o.Dir }

// Store manages the generations of one HAProxy configuration. Its methods are safe for
// concurrent use, but Activate/Rollback are meant to be called by one pipeline in turn.
type Store struct {
	configPath, sslDir, mapsDir, filesDir, stateDir string
	// recordDir holds the record of what HAProxy runs (default: stateDir).
	recordDir string

	log *slog.Logger

	mu sync.Mutex
	// templateSSLDirs, templateMapsDirs and templateFilesDirs are other names the rendered
	// configuration uses for the certificate, map and file directories (the remote storage
	// directories of the Data Plane API).
	templateSSLDirs, templateMapsDirs, templateFilesDirs []string
	adoptions                                            []Adoption
	seq                                                  int         // highest sequence number seen or staged
	live                                                 *Generation // what current points to
	previous                                             *Generation // live before the last Activate
	pending                                              *Generation // newest staged generation not activated yet

	// loadedMu orders the changes of the record of what HAProxy runs (BeginLoaded);
	// loadedSeq counts them.
	loadedMu  sync.Mutex
	loadedSeq uint64
}

// Option configures Open.
type Option func(*Store)

// WithLogger makes the store log what it adopts (default: nothing is logged).
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithMapsDir sets the stable path of the map file directory (default: MapsDirName beside
// the configuration path).
func WithMapsDir(dir string) Option { return func(s *Store) { s.mapsDir = dir } }

// WithFilesDir sets the stable path of the directory of other files (default: FilesDirName
// beside the configuration path).
func WithFilesDir(dir string) Option { return func(s *Store) { s.filesDir = dir } }

// WithRecordDir keeps the record of what HAProxy runs (SetLoaded) in dir rather than in the
// state directory: a directory that lives as long as HAProxy, in memory, keeps the record's
// removal before each runtime API change off a busy disk. A record the state directory holds
// (from a run before the option) is moved there.
func WithRecordDir(dir string) Option { return func(s *Store) { s.recordDir = dir } }

// Open prepares a store for configPath, sslDir and the map and file directories (the stable
// paths HAProxy and the templates use; see WithMapsDir, WithFilesDir) with its generations in
// stateDir (default: DefaultStateDirName beside configPath). It creates the directories it
// needs and finds the live generation left by a previous run. Files at the stable paths that
// are not the store's symlinks are adopted (see the package documentation): the adopted
// generation is then the live one, and the paths become the symlinks. Which generation is
// good (HAProxy loaded it) is not the store's to know: its caller says (Rollback, Prune).
func Open(configPath, sslDir, stateDir string, opts ...Option) (*Store, error) {
	if configPath == "" || sslDir == "" {
		return nil, errors.New("open generation store: config path and SSL directory are required")
	}
	var err error
	s := &Store{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(s)
	}
	if s.configPath, err = filepath.Abs(configPath); err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	// Beside the configuration unless given.
	s.sslDir, s.stateDir = sslDir, stateDir
	for _, d := range []struct {
		path *string
		name string
	}{{&s.mapsDir, MapsDirName}, {&s.filesDir, FilesDirName}, {&s.stateDir, DefaultStateDirName}} {
		if *d.path == "" {
			*d.path = filepath.Join(filepath.Dir(s.configPath), d.name)
		}
	}
	for _, p := range []*string{&s.sslDir, &s.mapsDir, &s.filesDir, &s.stateDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, fmt.Errorf("open generation store: %w", err)
		}
	}
	if s.recordDir == "" {
		s.recordDir = s.stateDir
	}
	if s.recordDir, err = filepath.Abs(s.recordDir); err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	paths := map[string]string{}
	named := []struct{ what, path string }{{"config path", s.configPath}, {"SSL directory", s.sslDir},
		{"maps directory", s.mapsDir}, {"files directory", s.filesDir}, {"state directory", s.stateDir}}
	if s.recordDir != s.stateDir { // the state directory is its default
		named = append(named, struct{ what, path string }{"record directory", s.recordDir})
	}
	for _, p := range named {
		if other, dup := paths[p.path]; dup {
			return nil, fmt.Errorf("open generation store: the %s and the %s are both %s: they must differ", other, p.what, p.path)
		}
		paths[p.path] = p.what
	}
	for _, dir := range []string{s.stateDir, s.recordDir, filepath.Dir(s.configPath), filepath.Dir(s.sslDir), filepath.Dir(s.mapsDir), filepath.Dir(s.filesDir)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open generation store: %w", err)
		}
	}

	if err := s.removeStateTemps(); err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	if err := s.moveRecord(); err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	entries, err := os.ReadDir(s.stateDir)
	if err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	for _, e := range entries {
		if m := genName.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			if n, err := strconv.Atoi(m[1]); err == nil && n > s.seq {
				s.seq = n
			}
		}
	}
	// A current link that names no generation (a crash long ago, a hand edit) is treated as
	// no live generation: the next Activate replaces it.
	if target, err := os.Readlink(filepath.Join(s.stateDir, CurrentName)); err == nil {
		if g, err := s.load(target); err == nil {
			s.live = g
		}
	}
	f, err := s.inspect()
	if err != nil {
		return nil, fmt.Errorf("open generation store: %w", err)
	}
	if f.any() {
		a, err := s.adoptFound(f, s.live)
		if err != nil {
			return nil, fmt.Errorf("open generation store: %w", err)
		}
		if err := s.point(a.Generation); err != nil {
			return nil, fmt.Errorf("open generation store: %w", err)
		}
		s.live = copyGen(a.Generation)
	}
	if s.live != nil {
		if err := s.ensureLinks(); err != nil {
			return nil, fmt.Errorf("open generation store: %w", err)
		}
	}
	return s, nil
}

// load describes the existing generation directory called name.
func (s *Store) load(name string) (*Generation, error) {
	m := genName.FindStringSubmatch(name)
	if m == nil || filepath.Base(name) != name {
		return nil, fmt.Errorf("%q is not a generation name", name)
	}
	dir := filepath.Join(s.stateDir, name)
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	seq, _ := strconv.Atoi(m[1])
	g := &Generation{Dir: dir, Seq: seq, Hash: m[2]}
	if b, err := os.ReadFile(filepath.Join(dir, hashName)); err == nil {
		g.Hash = strings.TrimSpace(string(b))
	}
	return g, nil
}

// ConfigPath is the path HAProxy is started with (-f).
func (s *Store) ConfigPath() string { return s.configPath }

// SSLDir is the certificate directory templates refer to.
func (s *Store) SSLDir() string { return s.sslDir }

// MapsDir is the map file directory templates refer to (mapsdir).
func (s *Store) MapsDir() string { return s.mapsDir }

// FilesDir is the directory of other files templates refer to (filesdir).
func (s *Store) FilesDir() string { return s.filesDir }

// StateDir holds the generations.
func (s *Store) StateDir() string { return s.stateDir }

// SetTemplateSSLDir names the certificate directory the templates render into the
// configuration when it is not SSLDir: with the Data Plane API, the configuration refers to
// the certificates where the remote host stores them, while the generation keeps them
// locally. CheckFile then rewrites that directory to the generation's certificates as well,
// so that `haproxy -c` checks the right files. An empty dir clears it.
func (s *Store) SetTemplateSSLDir(dir string) { s.SetTemplateSSLDirs(dir) }

// SetTemplateSSLDirs is SetTemplateSSLDir with several names: the directory the templates use
// now and the ones they used before (a rendering made just before the directory changed is
// still checked against the right certificates). Empty names are ignored.
func (s *Store) SetTemplateSSLDirs(dirs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templateSSLDirs = cleanDirs(dirs)
}

// SetTemplateMapsDirs is SetTemplateSSLDirs for the map file directory: CheckFile rewrites
// these directories to the generation's maps.
func (s *Store) SetTemplateMapsDirs(dirs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templateMapsDirs = cleanDirs(dirs)
}

// SetTemplateFilesDirs is SetTemplateSSLDirs for the directory of other files: CheckFile
// rewrites these directories to the generation's files.
func (s *Store) SetTemplateFilesDirs(dirs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.templateFilesDirs = cleanDirs(dirs)
}

func cleanDirs(dirs []string) []string {
	var clean []string
	for _, d := range dirs {
		if d != "" {
			clean = append(clean, filepath.Clean(d))
		}
	}
	return clean
}

// TemplateSSLDir returns the first directory SetTemplateSSLDir(s) set, "" if none.
func (s *Store) TemplateSSLDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.templateSSLDirs) == 0 {
		return ""
	}
	return s.templateSSLDirs[0]
}

// rewrites lists, for CheckFile, each directory the configuration may name with the
// directory of g that takes its place.
func (s *Store) rewrites(g *Generation) []pathRewrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rw []pathRewrite
	for _, d := range []struct {
		dirs []string
		to   string
	}{
		{append([]string{s.sslDir}, s.templateSSLDirs...), g.CertDir()},
		{append([]string{s.mapsDir}, s.templateMapsDirs...), g.MapsDir()},
		{append([]string{s.filesDir}, s.templateFilesDirs...), g.FilesDir()},
	} {
		for _, dir := range d.dirs {
			rw = append(rw, pathRewrite{from: dir, to: d.to})
		}
	}
	return rw
}

// Content is what one generation holds: the configuration as haproxy.cfg, each certificate as
// certs/<name>.pem, each map file as maps/<name> and each other file as files/<name>.
type Content = content.Files

// Stage is StageContent for a generation of a configuration and its certificates only (no
// map file or other file).
func (s *Store) Stage(config []byte, certs map[string][]byte, hash string) (*Generation, error) {
	return s.StageContent(Content{Config: config, Certs: certs}, hash)
}

// StageContent writes a complete new generation: the configuration as haproxy.cfg, each
// certificate as certs/<name>.pem, each map file in maps/ and each other file in files/, all
// fsynced, in a temporary directory renamed into place once complete. Nothing live changes.
// hash identifies the content (the bundle hash); when empty, c.Hash() is used.
func (s *Store) StageContent(c Content, hash string) (*Generation, error) {
	// The renderer, which makes the files, holds their names to content.CheckCertName and
	// CheckFileName; the store only keeps each file inside its directory.
	for _, m := range []map[string][]byte{c.Certs, c.Maps, c.Files} {
		for name := range m {
			if !oneFileName(name) {
				return nil, fmt.Errorf("stage generation: %q cannot be a file name: it is not one name inside its directory", name)
			}
		}
	}
	names := sortedKeys(c.Certs)
	if hash == "" {
		hash = c.Hash()
	}
	if strings.HasPrefix(hash, AdoptedPrefix) {
		return nil, fmt.Errorf("stage generation: hash %q is reserved for adopted files", hash)
	}

	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()

	g, err := s.writeGeneration(seq, hash, func(tmp string) error {
		if err := writeFile(filepath.Join(tmp, ConfigName), c.Config, configMode); err != nil {
			return err
		}
		certDir, err := mkdir(tmp, CertDirName, certDirMode)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := writeFile(filepath.Join(certDir, name+".pem"), c.Certs[name], certMode); err != nil {
				return fmt.Errorf("certificate %q: %w", name, err)
			}
		}
		if err := syncDir(certDir); err != nil {
			return err
		}
		// Always made, empty or not, so that MapsDir and FilesDir never dangle.
		for _, d := range []struct {
			name, what string
			files      map[string][]byte
		}{{MapsDirName, "map file", c.Maps}, {FilesDirName, "file", c.Files}} {
			dir, err := mkdir(tmp, d.name, auxDirMode)
			if err != nil {
				return err
			}
			for _, name := range sortedKeys(d.files) {
				if err := writeFile(filepath.Join(dir, name), d.files[name], auxMode); err != nil {
					return fmt.Errorf("%s %q: %w", d.what, name, err)
				}
			}
			if err := syncDir(dir); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stage generation %d: %w", seq, err)
	}
	g.Secret = c.Secret
	s.mu.Lock()
	if s.pending == nil || s.pending.Seq < seq {
		s.pending = g
	}
	s.mu.Unlock()
	return g, nil
}

// writeGeneration makes generation seq: fill writes its files into a temporary directory,
// which is renamed into place once complete (with the hash file) and fsynced.
func (s *Store) writeGeneration(seq int, hash string, fill func(tmp string) error) (*Generation, error) {
	short := hash[:min(12, len(hash))]
	if !hashChars.MatchString(short) || strings.ContainsAny(hash, "\n\r") {
		return nil, fmt.Errorf("hash %q is not usable in a directory name", hash)
	}
	tmp, err := os.MkdirTemp(s.stateDir, tmpPrefix+"gen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // no-op once renamed
	if err := os.Chmod(tmp, genDirMode); err != nil {
		return nil, err
	}
	if err := fill(tmp); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(tmp, hashName), []byte(hash+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := syncDir(tmp); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.stateDir, fmt.Sprintf("%s%d-%s", genPrefix, seq, short))
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	if err := syncDir(s.stateDir); err != nil {
		return nil, err
	}
	return &Generation{Dir: dir, Hash: hash, Seq: seq}, nil
}

// mkdir makes the directory name in parent with mode, whatever the umask.
func mkdir(parent, name string, mode os.FileMode) (string, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, mode); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return "", err
	}
	return dir, nil
}

// oneFileName says whether name names one file inside a directory (not the directory, its
// parent, or a path).
func oneFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\x00")
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckFile writes, inside g's directory, a copy of g's configuration in which every whole
// occurrence of the live SSLDir path (followed by "/" or the end of the path), and of the
// template SSL directories if set, is replaced by g.CertDir(), and likewise the map and file
// directories by g.MapsDir() and g.FilesDir(), so that `haproxy -c` checks exactly the
// certificates, maps and files that will go live while the live ones stay untouched. Line
// numbers are unchanged. It returns the copy's path.
func (s *Store) CheckFile(g *Generation) (string, error) {
	cfg, err := os.ReadFile(g.ConfigFile())
	if err != nil {
		return "", fmt.Errorf("write check file for %s: %w", g.name(), err)
	}
	out := replacePaths(cfg, s.rewrites(g))
	path := filepath.Join(g.Dir, checkName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("write check file for %s: %w", g.name(), err)
	}
	if err := writeFile(path, out, configMode); err != nil {
		return "", fmt.Errorf("write check file for %s: %w", g.name(), err)
	}
	return path, nil
}

// pathByte reports whether c can be part of a path name (other than the separator).
func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '~' || c == '+' || c == '@' || c >= 0x80
}

// pathRewrite is one directory CheckFile replaces.
type pathRewrite struct{ from, to string }

// replacePaths replaces each rewrite's from with its to in data where from is a whole path or
// a whole leading part of one: not preceded by a path character or "/", and followed by "/",
// or by a character that cannot continue a file name. In one pass: where several match at
// the same place (one directory inside the other), the longest wins; replaced text is not
// scanned again. Empty froms are ignored.
func replacePaths(data []byte, rewrites []pathRewrite) []byte {
	var rws []pathRewrite
	for _, rw := range rewrites {
		if rw.from != "" {
			rws = append(rws, rw)
		}
	}
	if len(rws) == 0 {
		return data
	}
	// Longest first, so that the first whole match at a position is the longest one.
	slices.SortStableFunc(rws, func(a, b pathRewrite) int { return len(b.from) - len(a.from) })
	pats := make([][]byte, len(rws))
	for k, rw := range rws {
		pats[k] = []byte(rw.from)
	}
	var b bytes.Buffer
	// at[k] is where pats[k] next occurs at or after i (-1: nowhere), kept across iterations so
	// that the text is scanned about once per pattern.
	at := make([]int, len(pats))
	for k := range at {
		at[k] = -2 // not searched yet
	}
	i := 0
	for {
		// The next place where any pattern starts.
		next := -1
		for k, p := range pats {
			if at[k] == -2 || at[k] >= 0 && at[k] < i {
				at[k] = -1
				if j := bytes.Index(data[i:], p); j >= 0 {
					at[k] = i + j
				}
			}
			if at[k] >= 0 && (next < 0 || at[k] < next) {
				next = at[k]
			}
		}
		if next < 0 {
			b.Write(data[i:])
			break
		}
		b.Write(data[i:next])
		matched, to := 0, ""
		for k, p := range pats {
			end := next + len(p)
			if !bytes.HasPrefix(data[next:], p) {
				continue
			}
			before := next == 0 || !(pathByte(data[next-1]) || data[next-1] == '/')
			after := end == len(data) || data[end] == '/' || !pathByte(data[end])
			if before && after {
				matched, to = len(p), rws[k].to
				break
			}
		}
		if matched > 0 {
			b.WriteString(to)
			i = next + matched
		} else {
			b.WriteByte(data[next])
			i = next + 1
		}
	}
	return b.Bytes()
}

// Live returns the generation current points to, nil if none.
func (s *Store) Live() *Generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyGen(s.live)
}

func copyGen(g *Generation) *Generation {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}

// Activate makes g live with one atomic rename of the current symlink, so ConfigPath and the
// directories switch together; it creates the stable paths as symlinks the first time (what
// they held is adopted first, as at Open). The generation that was live before is remembered
// for Rollback.
func (s *Store) Activate(g *Generation) error {
	if g == nil {
		return errors.New("activate: no generation")
	}
	if filepath.Dir(g.Dir) != s.stateDir || !genName.MatchString(g.name()) {
		return fmt.Errorf("activate %s: not a generation of %s", g.Dir, s.stateDir)
	}
	if _, err := os.Stat(g.ConfigFile()); err != nil {
		return fmt.Errorf("activate %s: %w", g.name(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Files put at the stable paths since Open (or since the last Activate) are kept too.
	f, err := s.inspect()
	if err != nil {
		return fmt.Errorf("activate %s: %w", g.name(), err)
	}
	if f.any() {
		if _, err := s.adoptFound(f, s.live); err != nil {
			return fmt.Errorf("activate %s: %w", g.name(), err)
		}
	}
	if err := s.point(g); err != nil {
		return fmt.Errorf("activate %s: %w", g.name(), err)
	}
	if !g.same(s.live) {
		s.previous = s.live
	}
	s.live = copyGen(g)
	if g.same(s.pending) {
		s.pending = nil
	}
	if err := s.ensureLinks(); err != nil {
		return fmt.Errorf("activate %s: %w", g.name(), err)
	}
	return nil
}

// point renames a fresh symlink to g over StateDir/current.
func (s *Store) point(g *Generation) error {
	if err := replaceWithSymlink(filepath.Join(s.stateDir, CurrentName), g.name()); err != nil {
		return err
	}
	return syncDir(s.stateDir)
}

// Rollback makes live again the generation to fall back to: good (the last one HAProxy
// loaded), or, if none is known, the one that was live before the last Activate. The
// generation it replaces is forgotten (Prune deletes it).
func (s *Store) Rollback(good *Generation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	target := good
	if target == nil {
		target = s.previous
	}
	if target == nil {
		return fmt.Errorf("roll back from %v: %w", nameOf(s.live), ErrNoRollback)
	}
	if target.same(s.live) {
		s.previous = nil
		return nil
	}
	if err := s.point(target); err != nil {
		return fmt.Errorf("roll back to %s: %w", target.name(), err)
	}
	s.live = copyGen(target)
	s.previous = nil
	return nil
}

func nameOf(g *Generation) string {
	if g == nil {
		return "no generation"
	}
	return g.name()
}

// Discard deletes a staged generation that will never go live (haproxy -c refused it),
// leaving every other one alone; the live one is never deleted.
func (s *Store) Discard(g *Generation) error {
	s.mu.Lock()
	if g == nil || g.same(s.live) || filepath.Dir(g.Dir) != s.stateDir || !genName.MatchString(g.name()) {
		s.mu.Unlock()
		return nil
	}
	if g.same(s.pending) {
		s.pending = nil
	}
	s.mu.Unlock()
	if err := os.RemoveAll(g.Dir); err != nil {
		return fmt.Errorf("discard generation %s: %w", g.name(), err)
	}
	return nil
}

// Prune deletes every generation except the live one, those in keep (the last good one), the
// newest staged one that was not activated yet and the adopted ones (the operator's own
// files), and any leftover temporary files.
func (s *Store) Prune(keep ...*Generation) error {
	s.mu.Lock()
	kept := map[string]bool{}
	for _, g := range append([]*Generation{s.live, s.pending}, keep...) {
		if g != nil {
			kept[g.name()] = true
		}
	}
	s.mu.Unlock()
	entries, err := os.ReadDir(s.stateDir)
	if err != nil {
		return fmt.Errorf("prune generations: %w", err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !(genName.MatchString(name) || strings.HasPrefix(name, tmpPrefix)) || kept[name] {
			continue
		}
		if m := genName.FindStringSubmatch(name); m != nil && strings.HasPrefix(m[2], AdoptedPrefix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.stateDir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune generations: %w", err)
	}
	return nil
}

// Generations lists the generation directories on disk, oldest first.
func (s *Store) Generations() ([]*Generation, error) {
	entries, err := os.ReadDir(s.stateDir)
	if err != nil {
		return nil, fmt.Errorf("list generations: %w", err)
	}
	var gens []*Generation
	for _, e := range entries {
		if genName.MatchString(e.Name()) && e.IsDir() {
			if g, err := s.load(e.Name()); err == nil {
				gens = append(gens, g)
			}
		}
	}
	slices.SortFunc(gens, func(a, b *Generation) int { return a.Seq - b.Seq })
	return gens, nil
}

// ensureLinks makes ConfigPath and the directories (SSLDir, MapsDir, FilesDir) the symlinks into current, replacing a regular file
// or another symlink by rename, and a directory by exchanging it with the symlink in one
// rename (then deleting the directory swapped out). What they held must have been adopted
// first (inspect, adopt): callers do. A mount point cannot be replaced: that is reported.
func (s *Store) ensureLinks() error {
	// The directories first, haproxy.cfg last: an HAProxy started the moment haproxy.cfg
	// appears finds every file it names.
	var links []struct{ path, target string }
	for _, d := range s.dirLinks() {
		links = append(links, struct{ path, target string }{d.path, filepath.Join(s.stateDir, CurrentName, d.name)})
	}
	links = append(links, struct{ path, target string }{s.configPath, filepath.Join(s.stateDir, CurrentName, ConfigName)})
	for _, l := range links {
		target := linkTarget(filepath.Dir(l.path), l.target)
		if cur, err := os.Readlink(l.path); err == nil && cur == target {
			continue
		}
		fi, err := os.Lstat(l.path)
		if err == nil && fi.IsDir() {
			err = swapDirWithSymlink(l.path, target)
		} else {
			err = replaceWithSymlink(l.path, target)
		}
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("%w (%s is a mount point, which cannot become a symlink into the generations: mount the volume on a directory above it, or choose another path)", err, l.path)
		}
		if err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(l.path)); err != nil {
			return err
		}
	}
	return nil
}

// linkTarget is target relative to dir when target lies beneath dir, else target itself (a
// relative target climbing with ".." breaks when dir is reached through a symlink).
func linkTarget(dir, target string) string {
	if rel, err := filepath.Rel(dir, target); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel
	}
	return target
}

// replaceWithSymlink atomically makes path a symlink to target: a temporary symlink beside it
// is renamed over it.
func replaceWithSymlink(path, target string) error {
	tmp, err := tempSymlink(filepath.Dir(path), filepath.Base(path), target)
	if err != nil {
		return fmt.Errorf("create symlink %s -> %s: %w", path, target, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create symlink %s -> %s: %w", path, target, err)
	}
	return nil
}

// swapDirWithSymlink replaces the directory at path with a symlink to target: the symlink is
// made beside it and exchanged with the directory in one rename (renameat2 RENAME_EXCHANGE),
// so that path always names one or the other; where the filesystem cannot exchange, the
// directory is renamed aside first (path is missing for an instant). The directory swapped
// out is then deleted.
func swapDirWithSymlink(path, target string) error {
	dir := filepath.Dir(path)
	tmp, err := tempSymlink(dir, filepath.Base(path), target)
	if err != nil {
		return fmt.Errorf("replace directory %s with a symlink to %s: %w", path, target, err)
	}
	err = exchange(tmp, path)
	if errors.Is(err, errNoExchange) {
		aside := tmp + ".old"
		if err = os.Rename(path, aside); err == nil {
			if err = os.Rename(tmp, path); err != nil {
				_ = os.Rename(aside, path)
			}
			tmp = aside
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace directory %s with a symlink to %s: %w", path, target, err)
	}
	// tmp now names the old directory, whose contents were adopted.
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove the directory swapped out of %s: %w", path, err)
	}
	return nil
}

// tempSymlink creates a symlink to target with a fresh temporary name in dir.
func tempSymlink(dir, base, target string) (string, error) {
	for i := 0; ; i++ {
		tmp := filepath.Join(dir, fmt.Sprintf("%s%s-%d-%d", tmpPrefix, base, os.Getpid(), i))
		err := os.Symlink(target, tmp)
		if errors.Is(err, os.ErrExist) && i < 100 {
			continue
		}
		return tmp, err
	}
}

// writeFile creates path (which must not exist) with data and mode, and fsyncs it.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	return writeTo(f, data, mode)
}

// writeTo writes data to the new file f, with mode, synced, and closes it.
func writeTo(f *os.File, data []byte, mode os.FileMode) error {
	if err := f.Chmod(mode); err != nil { // whatever the umask
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// loadedName is the file in the record directory (default: the state directory) that says
// what HAProxy was last known to run.
const loadedName = "loaded"

// Loaded is what HAProxy was last known to run: the hash of a rendering, and an identifier of
// the HAProxy load that runs it (see reload.MasterSocket.LoadID). It lets a restarted sidecar
// find HAProxy still running what it last made live, and leave it alone.
type Loaded struct {
	Hash   string
	LoadID string
}

// SetLoaded records l, replacing the file atomically; the zero Loaded removes the record
// (what HAProxy runs is not known). It is BeginLoaded and its finish at once.
func (s *Store) SetLoaded(l Loaded) error {
	finish, err := s.BeginLoaded(l)
	if err != nil {
		return err
	}
	return finish()
}

// BeginLoaded starts replacing the record with l, in the order of the calls, and returns
// what finishes it. Forgetting (the zero Loaded) is done before it returns, and is quick: the
// file is gone, no sync (the record outlives the sidecar, not HAProxy: a node that crashes
// takes HAProxy with it). A new record is written and synced by finish, which needs no lock
// of the caller's: a record begun later wins whatever the order the finishes run in (a write
// it superseded is dropped, never renamed over it).
func (s *Store) BeginLoaded(l Loaded) (finish func() error, err error) {
	path := filepath.Join(s.recordDir, loadedName)
	if l != (Loaded{}) && strings.ContainsAny(l.Hash+l.LoadID, "\n") {
		return nil, fmt.Errorf("record what HAProxy runs: a newline in %q", l)
	}
	s.loadedMu.Lock()
	defer s.loadedMu.Unlock()
	s.loadedSeq++
	if l == (Loaded{}) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("forget what HAProxy runs: %w", err)
		}
		return func() error { return nil }, nil
	}
	seq := s.loadedSeq
	return func() error {
		err := s.writeStateFrom(s.recordDir, loadedName, func(w io.Writer) error {
			_, err := io.WriteString(w, l.Hash+"\n"+l.LoadID+"\n")
			return err
		}, func(rename func() error) error {
			s.loadedMu.Lock()
			defer s.loadedMu.Unlock()
			if s.loadedSeq != seq {
				return errSuperseded
			}
			return rename()
		})
		if errors.Is(err, errSuperseded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record what HAProxy runs: %w", err)
		}
		return nil
	}, nil
}

// removeStateTemps removes the state files a crashed run was writing (nothing writes them
// while the store opens: its caller holds the state directory's Lock).
func (s *Store) removeStateTemps() error {
	for _, dir := range []string{s.stateDir, s.recordDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), stateTmpPrefix) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

// moveRecord moves a record left in the state directory into the record directory, when they
// differ and the record directory has none: a sidecar restarted with WithRecordDir still
// finds HAProxy running what it recorded.
func (s *Store) moveRecord() error {
	old := filepath.Join(s.stateDir, loadedName)
	if s.recordDir == s.stateDir {
		return nil
	}
	b, err := os.ReadFile(old)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("move the record of what HAProxy runs: %w", err)
	}
	if _, err := os.Lstat(filepath.Join(s.recordDir, loadedName)); errors.Is(err, fs.ErrNotExist) {
		if err := s.writeStateFrom(s.recordDir, loadedName, func(w io.Writer) error {
			_, err := w.Write(b)
			return err
		}, renameNow); err != nil {
			return fmt.Errorf("move the record of what HAProxy runs: %w", err)
		}
	}
	if err := os.Remove(old); err != nil {
		return fmt.Errorf("move the record of what HAProxy runs: %w", err)
	}
	return nil
}

// errSuperseded: a record begun later was begun before this one was in place.
var errSuperseded = errors.New("superseded")

// WriteState replaces the state file name (in StateDir, beside the generations) with data,
// atomically and synced, mode 0600 (it may hold private keys): for what the sidecar must
// remember across restarts.
func (s *Store) WriteState(name string, data []byte) error {
	return s.WriteStateFrom(name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteStateFrom is WriteState with the content written by write, through a buffer: a large
// state need not be held in memory whole.
func (s *Store) WriteStateFrom(name string, write func(io.Writer) error) error {
	return s.writeStateFrom(s.stateDir, name, write, renameNow)
}

// renameNow puts a state file in place as soon as it is written (writeStateFrom's place).
func renameNow(rename func() error) error { return rename() }

// writeStateFrom is WriteStateFrom into dir, with the rename into place done by place, which
// may refuse it (its error is returned, the file left where it was).
func (s *Store) writeStateFrom(dir, name string, write func(io.Writer) error, place func(rename func() error) error) error {
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") || genName.MatchString(name) || name == CurrentName {
		return fmt.Errorf("state file name %q", name)
	}
	f, err := os.CreateTemp(dir, stateTmpPrefix+name) // 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op once renamed
	bw := bufio.NewWriterSize(f, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(func() error { return os.Rename(f.Name(), filepath.Join(dir, name)) })
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// ReadState returns what WriteState wrote last under name, even in an earlier run.
func (s *Store) ReadState(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.stateDir, name))
}

// Loaded returns what SetLoaded recorded last, even in an earlier run; false if nothing is.
func (s *Store) Loaded() (Loaded, bool) {
	b, err := os.ReadFile(filepath.Join(s.recordDir, loadedName))
	if err != nil {
		return Loaded{}, false
	}
	hash, id, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
	if !ok || hash == "" || id == "" {
		return Loaded{}, false
	}
	return Loaded{Hash: hash, LoadID: id}, true
}
