package generation

import (
	"fmt"
	"os"
	"path/filepath"
)

// ExportPaths are where Export puts a generation's files.
type ExportPaths struct {
	Config, SSLDir, MapsDir, FilesDir string
}

// Export copies the files of generation g to plain files at to (`render --out`): the
// configuration, the certificates, the map files and the other files, with the modes a
// generation has. Directories are made when missing; each file is replaced with one rename.
// Directories without files are not made.
func Export(g *Generation, to ExportPaths) error {
	if err := exportFile(g.ConfigFile(), to.Config, configMode); err != nil {
		return err
	}
	for _, d := range []struct {
		from, to      string
		dirMode, mode os.FileMode
	}{{g.CertDir(), to.SSLDir, certDirMode, certMode}, {g.MapsDir(), to.MapsDir, auxDirMode, auxMode}, {g.FilesDir(), to.FilesDir, auxDirMode, auxMode}} {
		entries, err := os.ReadDir(d.from)
		if err != nil {
			return fmt.Errorf("export %s: %w", d.from, err)
		}
		if len(entries) == 0 {
			continue
		}
		if err := os.MkdirAll(d.to, d.dirMode); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, e := range entries {
			if err := exportFile(filepath.Join(d.from, e.Name()), filepath.Join(d.to, e.Name()), d.mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// exportFile copies from to to (mode), replacing to with one rename. The file is written
// under a name of its own first, so that two exports into one directory at once do not write
// each other's temporary files (the last rename wins).
func exportFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(to), tmpPrefix+filepath.Base(to)+"-*")
	if err != nil {
		return fmt.Errorf("export %s: %w", to, err)
	}
	tmp := f.Name()
	err = writeTo(f, data, mode)
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("export %s: %w", to, err)
	}
	return nil
}
