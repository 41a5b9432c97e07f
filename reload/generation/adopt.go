package generation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// AdoptedPrefix starts the hash of an adopted generation: files the store found at its
// stable paths that it had not put there (a running installation taken over, a file replaced
// by hand). Adopted generations are never pruned: they are the operator's own files.
const AdoptedPrefix = "adopted-"

// originName is the file inside an adopted generation that says where its files came from.
const originName = "adopted-from"

// Limits of what is adopted, per directory: a certificate or map directory is small; a
// mistaken --ssl-dir pointing at a large tree is reported rather than copied.
const (
	maxAdoptBytes   = 256 << 20
	maxAdoptEntries = 10000
	maxAdoptDepth   = 16
)

// Adoption is one set of files found at the stable paths and kept as a generation.
type Adoption struct {
	Generation *Generation
	// ConfigFrom, SSLDirFrom, MapsDirFrom and FilesDirFrom are the paths whose contents were
	// adopted ("" for a path that held nothing of its own: its part came from the live
	// generation, or there was none).
	ConfigFrom, SSLDirFrom, MapsDirFrom, FilesDirFrom string
	// Reused is set when an adopted generation with the same contents was kept already.
	Reused bool
}

// IsAdopted reports whether g was made of adopted files.
func (g *Generation) IsAdopted() bool { return strings.HasPrefix(g.Hash, AdoptedPrefix) }

// treeEntry is one file or directory of an adopted directory.
type treeEntry struct {
	rel  string // slash-separated path below the directory
	dir  bool
	mode fs.FileMode
	data []byte
}

// dirLink is one of the stable directory paths: where it is, and its directory in a
// generation.
type dirLink struct {
	path string // the stable path (SSLDir, MapsDir, FilesDir)
	name string // CertDirName, MapsDirName or FilesDirName
	what string // how messages name it
	mode fs.FileMode
}

// dirLinks lists the stable directory paths, certificates first.
func (s *Store) dirLinks() []dirLink {
	return []dirLink{
		{s.sslDir, CertDirName, "certificate directory", certDirMode},
		{s.mapsDir, MapsDirName, "map file directory", auxDirMode},
		{s.filesDir, FilesDirName, "files directory", auxDirMode},
	}
}

// foundDir is what one stable directory path holds of its own.
type foundDir struct {
	entries []treeEntry
	from    string // "" when the path holds nothing of its own
}

// found is what the stable paths hold that the store did not put there.
type found struct {
	config     []byte
	configFrom string              // "" when ConfigPath holds nothing of its own
	dirs       map[string]foundDir // by name in a generation (CertDirName, ...)
}

func (f *found) any() bool {
	if f.configFrom != "" {
		return true
	}
	for _, d := range f.dirs {
		if d.from != "" {
			return true
		}
	}
	return false
}

// inspect looks at the stable paths: whatever is there other than the store's own symlinks
// (a regular file, a symlink elsewhere, a directory with files) is returned, to be adopted
// before the paths are replaced. A missing path, a dangling foreign symlink and an empty
// directory hold nothing worth keeping.
func (s *Store) inspect() (*found, error) {
	f := &found{dirs: map[string]foundDir{}}
	cfgTarget := linkTarget(filepath.Dir(s.configPath), filepath.Join(s.stateDir, CurrentName, ConfigName))
	if own, err := s.owns(s.configPath, cfgTarget); err != nil {
		return nil, err
	} else if !own {
		fi, err := os.Stat(s.configPath) // through a foreign symlink
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read the existing %s: %w", s.configPath, err)
		case fi.IsDir():
			return nil, fmt.Errorf("the configuration path %s is a directory", s.configPath)
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("the configuration path %s is not a regular file (%v)", s.configPath, fi.Mode().Type())
		default:
			b, err := os.ReadFile(s.configPath)
			if err != nil {
				return nil, fmt.Errorf("read the existing %s: %w", s.configPath, err)
			}
			f.config, f.configFrom = b, s.configPath
		}
	}
	for _, d := range s.dirLinks() {
		target := linkTarget(filepath.Dir(d.path), filepath.Join(s.stateDir, CurrentName, d.name))
		own, err := s.owns(d.path, target)
		if err != nil {
			return nil, err
		}
		if own {
			continue
		}
		fi, err := os.Stat(d.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read the existing %s: %w", d.path, err)
		case !fi.IsDir():
			return nil, fmt.Errorf("the %s %s is not a directory", d.what, d.path)
		default:
			entries, err := readTree(d.path, d.what)
			if err != nil {
				return nil, fmt.Errorf("read the existing %s %s: %w", d.what, d.path, err)
			}
			if hasFiles(entries) {
				f.dirs[d.name] = foundDir{entries: entries, from: d.path}
			}
		}
	}
	return f, nil
}

// owns reports whether path is the store's symlink to target.
func (s *Store) owns(path, target string) (bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("inspect %s: %w", path, err)
	case fi.Mode()&fs.ModeSymlink == 0:
		return false, nil
	}
	cur, err := os.Readlink(path)
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", path, err)
	}
	return cur == target, nil
}

func hasFiles(entries []treeEntry) bool {
	for _, e := range entries {
		if !e.dir {
			return true
		}
	}
	return false
}

// readTree reads the regular files and directories below root, following symlinks (a
// certificate directory made of links into another tree is adopted as the files they name).
// Other kinds of files (sockets, devices) are skipped. what names the directory in errors.
func readTree(root, what string) ([]treeEntry, error) {
	var out []treeEntry
	var total int64
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		if depth > maxAdoptDepth {
			return fmt.Errorf("%s: deeper than %d directories (a symlink loop?)", dir, maxAdoptDepth)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			r := e.Name()
			if rel != "" {
				r = rel + "/" + e.Name()
			}
			fi, err := os.Stat(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a dangling symlink: nothing to keep
			}
			if err != nil {
				return err
			}
			if len(out) >= maxAdoptEntries {
				return fmt.Errorf("more than %d entries: is this really a %s?", maxAdoptEntries, what)
			}
			switch {
			case fi.IsDir():
				out = append(out, treeEntry{rel: r, dir: true, mode: fi.Mode().Perm()})
				if err := walk(path, r, depth+1); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if total += fi.Size(); total > maxAdoptBytes {
					return fmt.Errorf("more than %d MiB: is this really a %s?", maxAdoptBytes>>20, what)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				out = append(out, treeEntry{rel: r, mode: fi.Mode().Perm(), data: b})
			}
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// adopt keeps what f found as a generation (or finds the identical one kept before). The
// parts of the stable paths that are the store's own come from base (the live generation),
// so that the adopted generation is exactly what HAProxy reads through the stable paths now.
// The caller holds s.mu or has the store to itself.
func (s *Store) adopt(f *found, base *Generation) (Adoption, error) {
	config, hasConfig := f.config, f.configFrom != ""
	if !hasConfig && base != nil {
		if b, err := os.ReadFile(base.ConfigFile()); err == nil {
			config, hasConfig = b, true
		}
	}
	links := s.dirLinks()
	trees := map[string][]treeEntry{}
	for _, d := range links {
		if fd := f.dirs[d.name]; fd.from != "" {
			trees[d.name] = fd.entries
		} else if base != nil {
			if entries, err := readTree(filepath.Join(base.Dir, d.name), d.what); err == nil {
				trees[d.name] = entries
			}
		}
	}
	hash := adoptedHash(config, hasConfig, trees)
	a := Adoption{ConfigFrom: f.configFrom, SSLDirFrom: f.dirs[CertDirName].from,
		MapsDirFrom: f.dirs[MapsDirName].from, FilesDirFrom: f.dirs[FilesDirName].from}
	if gens, err := s.Generations(); err == nil {
		for _, g := range gens {
			if g.Hash == hash {
				a.Generation, a.Reused = g, true
				return a, nil
			}
		}
	}
	s.seq++
	origin := fmt.Sprintf("time %s\nconfig %s\nssl-dir %s\nmaps-dir %s\nfiles-dir %s\n", time.Now().UTC().Format(time.RFC3339),
		orNone(f.configFrom, base, "the live generation's haproxy.cfg"),
		orNone(a.SSLDirFrom, base, "the live generation's certificates"),
		orNone(a.MapsDirFrom, base, "the live generation's map files"),
		orNone(a.FilesDirFrom, base, "the live generation's files"))
	g, err := s.writeGeneration(s.seq, hash, func(tmp string) error {
		if hasConfig {
			if err := writeFile(filepath.Join(tmp, ConfigName), config, configMode); err != nil {
				return err
			}
		}
		if err := writeFile(filepath.Join(tmp, originName), []byte(origin), 0o644); err != nil {
			return err
		}
		for _, d := range links {
			if err := writeTree(tmp, d, trees[d.name]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Adoption{}, fmt.Errorf("keep the existing files as a generation: %w", err)
	}
	a.Generation = g
	return a, nil
}

// writeTree writes adopted entries as the directory d.name of the generation being made in
// tmp (made even when there are none, so that the stable path does not dangle).
func writeTree(tmp string, d dirLink, entries []treeEntry) error {
	root, err := mkdir(tmp, d.name, d.mode)
	if err != nil {
		return err
	}
	dirs := []string{root}
	for _, e := range entries {
		path := filepath.Join(root, filepath.FromSlash(e.rel))
		if e.dir {
			// Owner access kept whatever the original said, so the copy can be written
			// and pruned.
			if err := os.Mkdir(path, e.mode|0o700); err != nil {
				return err
			}
			dirs = append(dirs, path)
			continue
		}
		if err := writeFile(path, e.data, e.mode); err != nil {
			return err
		}
	}
	for _, dir := range dirs {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func orNone(path string, base *Generation, fromBase string) string {
	switch {
	case path != "":
		return path
	case base != nil:
		return fromBase
	}
	return "(none)"
}

// adoptedHash identifies adopted contents: AdoptedPrefix and a SHA-256 of the files. The
// map and file directories count only when they hold something, so that adoptions made
// before they existed keep their hash.
//
// It is not content.Files.Hash: it covers what a rendering does not have (file modes,
// directories, trees below the directories, no configuration at all), and it is persisted
// (the generation's name and hash file) and matched at every adoption to reuse the adopted
// generation of the same files, which is never pruned: a new encoding would keep a second
// copy of them. TestAdoptedHashWithoutAuxiliaryFiles pins it.
func adoptedHash(config []byte, hasConfig bool, trees map[string][]treeEntry) string {
	h := sha256.New()
	if hasConfig {
		fmt.Fprintf(h, "config %d\n", len(config))
		h.Write(config)
	} else {
		fmt.Fprintf(h, "no config\n")
	}
	for _, name := range []string{CertDirName, MapsDirName, FilesDirName} {
		entries := trees[name]
		if name != CertDirName {
			if len(entries) == 0 {
				continue
			}
			fmt.Fprintf(h, "tree %q %d\n", name, len(entries))
		}
		sorted := append([]treeEntry(nil), entries...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].rel < sorted[j].rel })
		for _, e := range sorted {
			if e.dir {
				fmt.Fprintf(h, "dir %q %o\n", e.rel, e.mode)
				continue
			}
			fmt.Fprintf(h, "file %q %o %d\n", e.rel, e.mode, len(e.data))
			h.Write(e.data)
		}
	}
	return AdoptedPrefix + hex.EncodeToString(h.Sum(nil))
}

// adoptFound adopts what inspect found, records it and logs it. The caller holds s.mu or has
// the store to itself.
func (s *Store) adoptFound(f *found, base *Generation) (Adoption, error) {
	a, err := s.adopt(f, base)
	if err != nil {
		return a, err
	}
	s.adoptions = append(s.adoptions, a)
	attrs := []any{"generation", a.Generation.Dir}
	if a.ConfigFrom != "" {
		attrs = append(attrs, "config", a.ConfigFrom)
	}
	for _, p := range []struct{ key, from string }{{"ssl_dir", a.SSLDirFrom}, {"maps_dir", a.MapsDirFrom}, {"files_dir", a.FilesDirFrom}} {
		if p.from != "" {
			attrs = append(attrs, p.key, p.from)
		}
	}
	if a.Reused {
		attrs = append(attrs, "reused", true)
	}
	s.log.Info("kept the existing files as the adopted generation; the sidecar's own generations replace them through symlinks", attrs...)
	return a, nil
}

// Adoptions lists the files this Store adopted (at Open, or found at the stable paths at an
// Activate), oldest first.
func (s *Store) Adoptions() []Adoption {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Adoption, len(s.adoptions))
	for i, a := range s.adoptions {
		out[i] = a
		out[i].Generation = copyGen(a.Generation)
	}
	return out
}

// errNoExchange means the two names could not be swapped in one rename.
var errNoExchange = errors.New("atomic exchange not supported")
