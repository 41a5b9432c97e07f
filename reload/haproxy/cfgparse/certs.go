package cfgparse

import (
	"path/filepath"
	"strings"
)

// CertUse says how a configuration uses the files of one certificate directory.
type CertUse struct {
	// Files maps a file name in the directory to the paths under which bind lines load it
	// with "crt <path>": the names HAProxy's certificate store knows it by.
	Files map[string][]string
	// Dirs are the paths under which bind lines load the whole directory with "crt <dir>",
	// trailing slashes removed as HAProxy does; HAProxy knows each file in it as
	// "<dir>/<file>".
	Dirs []string
	// Other are the file names used in any other way (ca-file, crt-list, a server's crt...).
	Other map[string]bool
	// OtherDir is set when the directory itself is named anywhere but in a bind line's crt
	// (crt-base, a deeper path, an expression): then any file of it may be in use.
	OtherDir bool
}

// Used reports whether the file is loaded by HAProxy in any way this CertUse knows of.
func (u *CertUse) Used(file string) bool {
	return len(u.Files[file]) > 0 || len(u.Dirs) > 0 || u.Other[file] || u.OtherDir
}

// CertUse finds where the configuration names dir (an absolute, clean path) or files in it.
func (c *Config) CertUse(dir string) *CertUse {
	u := &CertUse{Files: map[string][]string{}, Other: map[string]bool{}}
	if dir == "" {
		return u
	}
	dirs := map[string]bool{}
	scan := func(words []string, bind bool) {
		for i, w := range words {
			if !strings.Contains(w, dir) {
				continue
			}
			v := Unquote(w)
			if !strings.HasPrefix(v, dir) {
				u.OtherDir = true
				continue
			}
			clean := filepath.Clean(v)
			crt := bind && i > 0 && Unquote(words[i-1]) == "crt"
			switch {
			case clean == dir && crt:
				p := strings.TrimRight(v, "/")
				if !dirs[p] {
					dirs[p] = true
					u.Dirs = append(u.Dirs, p)
				}
			case filepath.Dir(clean) == dir && clean != dir && crt:
				name := filepath.Base(clean)
				if !contains(u.Files[name], v) {
					u.Files[name] = append(u.Files[name], v)
				}
			case filepath.Dir(clean) == dir && clean != dir:
				u.Other[filepath.Base(clean)] = true
			default:
				u.OtherDir = true
			}
		}
	}
	for _, s := range c.Sections {
		scan(s.Header, false)
		for _, l := range s.Lines {
			if !strings.Contains(l, dir) {
				continue
			}
			words, _ := Words(l)
			scan(words, len(words) > 0 && Unquote(words[0]) == "bind")
		}
		for _, srv := range s.Servers {
			scan(srv.Params, false)
			scan(srv.Inherited, false)
			scan([]string{srv.Address}, false)
		}
	}
	return u
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
