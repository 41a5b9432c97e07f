package generation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LiveIn is the live generation of the state directory stateDir (the one `current` names),
// read without opening a Store: nothing is created, adopted or changed.
func LiveIn(stateDir string) (*Generation, error) {
	target, err := os.Readlink(filepath.Join(stateDir, CurrentName))
	if err != nil {
		return nil, fmt.Errorf("no live generation in %s: %w", stateDir, err)
	}
	g, err := (&Store{stateDir: stateDir}).load(target)
	if err != nil {
		return nil, fmt.Errorf("the live generation of %s: %w", stateDir, err)
	}
	return g, nil
}

// Read returns the files of generation g.
func Read(g *Generation) (Content, error) {
	var c Content
	var err error
	if c.Config, err = os.ReadFile(g.ConfigFile()); err != nil {
		return c, fmt.Errorf("read %s: %w", g.name(), err)
	}
	for _, d := range []struct {
		dir, ext string
		into     *map[string][]byte
	}{{g.CertDir(), ".pem", &c.Certs}, {g.MapsDir(), "", &c.Maps}, {g.FilesDir(), "", &c.Files}} {
		entries, err := os.ReadDir(d.dir)
		if err != nil && !os.IsNotExist(err) {
			return c, fmt.Errorf("read %s: %w", g.name(), err)
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), d.ext)
			if !ok || e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d.dir, e.Name()))
			if err != nil {
				return c, fmt.Errorf("read %s: %w", g.name(), err)
			}
			if *d.into == nil {
				*d.into = map[string][]byte{}
			}
			(*d.into)[name] = b
		}
	}
	return c, nil
}
