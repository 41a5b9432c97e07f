package config

import (
	"flag"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// Render is how templates are rendered and the result checked.
type Render struct {
	Timeout   time.Duration
	MaxOutput Size
	// Validate runs haproxy -c (HAProxyBin) on every rendering before it can go live.
	Validate   bool
	HAProxyBin string
}

func (*Render) title() string { return "Rendering and validation" }

func (r *Render) register(fs *flag.FlagSet) {
	fs.DurationVar(&r.Timeout, "render-timeout", render.DefaultTimeout, "time budget of one render: a template still running after it is rejected (a loop that never ends) and held back")
	r.MaxOutput = Size(render.DefaultMaxOutput)
	fs.Var(&r.MaxOutput, "render-max-output", "`SIZE` budget of one render (64MiB, 1GiB or bytes): a larger haproxy.cfg, or a larger value built on the way, is rejected and held back")
	fs.BoolVar(&r.Validate, "validate", true, "validate with haproxy -c before anything goes live (render and validate fail when haproxy is not found, rather than pass unchecked)")
	fs.StringVar(&r.HAProxyBin, "haproxy-bin", "haproxy", "haproxy binary used for validation (haproxy -c)")
}

func (r *Render) validate() error { return nil }

// Options are the render budgets, for templates that see sslDir as ssldir.
func (r *Render) Options(sslDir string) render.Options {
	return render.Options{SSLDir: sslDir, Timeout: r.Timeout, MaxOutput: int(r.MaxOutput)}
}

// Dirs are the directories templates see as ssldir, mapsdir and filesdir.
type Dirs struct {
	SSL, Maps, Files string
}

func (*Dirs) title() string { return "Directories templates name" }

func (d *Dirs) register(fs *flag.FlagSet) {
	fs.StringVar(&d.SSL, "ssl-dir", "", "certificate directory templates see as ssldir (run: default DIR(--haproxy-config)/certs, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/certs)")
	fs.StringVar(&d.Maps, "maps-dir", "", "directory of the map files (config keys NAME.map) templates see as mapsdir (run: default DIR(--haproxy-config)/maps, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/maps)")
	fs.StringVar(&d.Files, "files-dir", "", "directory of the other files (config keys files.NAME, files.NAME.j2) templates see as filesdir (run: default DIR(--haproxy-config)/files, made a symlink into the live generation; an existing directory is kept as the adopted generation; not used with --reload=dataplane; render: --out/files)")
}

func (d *Dirs) validate() error { return nil }
