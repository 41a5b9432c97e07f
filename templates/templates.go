// Package templates holds the built-in default HAProxy configuration template, used when no
// `config` ConfigMap provides one.
package templates

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.j2
var files embed.FS

// DefaultKey is the key (file name) of the main default template in Default.
const DefaultKey = "default.cfg.j2"

// Default maps each embedded template file name to its text. Render it with
// render.Renderer; errors in it are reported as File "templates/<name>".
var Default = load()

func load() map[string]string {
	m := map[string]string{}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".j2") {
			continue
		}
		b, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}
