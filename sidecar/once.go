package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/pipeline"
)

// Once is `render` (into cfg.Out) and `validate` (writing nothing): the inputs read once and
// taken through the steps `run` takes (package candidate: every bad input held back and
// reported, the rest rendered, staged as a generation and validated with haproxy -c), then the
// generation written out as plain files (render) or its hash printed (validate). What it did is
// printed to stdout; it fails when any input is held back.
func Once(ctx context.Context, cfg *config.Once, stdout io.Writer, env Env) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	red := newRedactor(cfg.Inputs, cfg.Source.Etcd, &config.Dataplane{})
	log, err := newLogger(cfg.Log, env.Log, red)
	if err != nil {
		return err
	}
	warnWeakSecrets(log, cfg.Inputs, cfg.Source.Etcd, &config.Dataplane{})
	return red.Error(once(ctx, cfg, stdout, log, red))
}

func once(ctx context.Context, cfg *config.Once, stdout io.Writer, log *slog.Logger, red *redactor) error {
	if cfg.Render.Validate && !validate.Available(cfg.Render.HAProxyBin) {
		return fmt.Errorf("cannot validate: %q not found (install HAProxy, pass --haproxy-bin, or pass --validate=false to skip validation)",
			cfg.Render.HAProxyBin)
	}
	dirs, err := onceDirs(cfg)
	if err != nil {
		return err
	}
	peers, err := peersOptions(cfg.Peers, cfg.Inputs.Namespace, cfg.Source)
	if err != nil {
		return err
	}
	objs, unread, err := readOnce(ctx, cfg.Source, cfg.Inputs, peers.Namespace, log)
	if err != nil {
		return err
	}
	build, cleanup, err := stagingBuilder(cfg.Inputs, peers, cfg.Render, dirs)
	if err != nil {
		return err
	}
	defer cleanup()
	cur := build.Decode(objs)
	red.Set("certificate-keys", certKeyLines(cur)...)
	made := build.Make(ctx, objs, cur, &quarantine.State{}, unread, true)
	held := heldErrors(made.Held)
	if made.Err != nil {
		return &Rejected{errors.Join(append(held, made.Err)...)}
	}
	if len(held) > 0 {
		return &Rejected{errors.Join(append(held, fmt.Errorf("%d input(s) rejected; the others render and validate", len(held)))...)}
	}
	c := made.Candidate
	for _, t := range c.Tests {
		if t.NotChecked {
			fmt.Fprintf(stdout, "test %s: ok, but valid: true not checked (--validate=false)\n", t.Name)
			continue
		}
		fmt.Fprintf(stdout, "test %s: ok\n", t.Name)
	}
	for _, w := range c.Warnings {
		fmt.Fprintf(stdout, "warning: haproxy -c: %s\n", w)
	}
	if cfg.Command == "validate" {
		what := "valid"
		if !cfg.Render.Validate {
			what = "rendered, not validated (--validate=false)"
		}
		fmt.Fprintf(stdout, "%s: %d services, %d certificates, hash %s\n", what, c.Info.Services, c.Info.Certificates, c.Bundle.Hash[:12])
		return nil
	}
	if err := generation.Export(c.Gen, dirs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %d certificate(s) to %s\n", dirs.Config, len(c.Bundle.Certificates), dirs.SSLDir)
	if len(c.Bundle.Maps)+len(c.Bundle.Files) > 0 {
		fmt.Fprintf(stdout, "wrote %d map file(s) to %s and %d file(s) to %s\n", len(c.Bundle.Maps), dirs.MapsDir, len(c.Bundle.Files), dirs.FilesDir)
	}
	return nil
}

// Rejected is why render or validate failed on bad input: one line per input rejected (each
// naming its object, key and line, and starting with FILE:LINE:COL when it was read from a
// file). It is printed as it is, each line where editors and CI annotators look for one.
type Rejected struct{ Err error }

func (r *Rejected) Error() string { return r.Err.Error() }
func (r *Rejected) Unwrap() error { return r.Err }

// stagingBuilder makes candidates as run does, staged in a temporary directory (cleanup
// removes it) instead of beside what HAProxy reads: its stable paths are the temporary
// directory's, and the directories templates name (dirs) are checked as the staged ones.
func stagingBuilder(in config.Inputs, peers snapshot.PeersOptions, r config.Render, dirs generation.ExportPaths) (*candidate.Builder, func(), error) {
	return stagingBuilderWith(in, peers, r, dirs, nil)
}

// stagingBuilderWith is stagingBuilder with the renderer given (nil: one of its own).
func stagingBuilderWith(in config.Inputs, peers snapshot.PeersOptions, r config.Render, dirs generation.ExportPaths, rend candidate.Renderer) (*candidate.Builder, func(), error) {
	stage, err := os.MkdirTemp("", "haproxy-sidecar-stage-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(stage) }
	store, err := generation.Open(filepath.Join(stage, generation.ConfigName), filepath.Join(stage, generation.CertDirName), filepath.Join(stage, "state"))
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("stage: %w", err)
	}
	store.SetTemplateSSLDirs(dirs.SSLDir)
	store.SetTemplateMapsDirs(dirs.MapsDir)
	store.SetTemplateFilesDirs(dirs.FilesDir)
	bo, err := snapshotOptions(in)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	bo.Peers = peers
	if rend == nil {
		ro := r.Options(dirs.SSLDir)
		ro.MapsDir, ro.FilesDir = dirs.MapsDir, dirs.FilesDir
		rend = render.New(ro)
	}
	bc := candidate.Config{Inputs: snapshot.Builder{Options: bo}, Renderer: rend, Store: store, Manifests: manifests(in)}
	if r.Validate {
		bc.Checker = validate.Checker{Binary: r.HAProxyBin}
	}
	return candidate.New(bc), cleanup, nil
}

// onceDirs are where render writes (--out), and the directories templates name: --ssl-dir,
// --maps-dir and --files-dir, else those in --out. validate writes nothing: its directories
// default to run's (beside its --haproxy-config, /etc/haproxy/haproxy.cfg unless given), so
// that it prints the hash run would.
func onceDirs(cfg *config.Once) (generation.ExportPaths, error) {
	if cfg.Command == "validate" && cfg.HAProxyConfig != "" {
		return templateDirs(filepath.Dir(cfg.HAProxyConfig), cfg.Dirs)
	}
	return templateDirs(cfg.Out, cfg.Dirs)
}

// templateDirs are the files and directories in out (default: run's, beside
// /etc/haproxy/haproxy.cfg), or as dirs gives them.
func templateDirs(out string, dirs config.Dirs) (generation.ExportPaths, error) {
	if out == "" {
		out = filepath.Dir(config.DefaultHAProxyConfig)
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return generation.ExportPaths{}, err
	}
	d := generation.ExportPaths{Config: filepath.Join(out, generation.ConfigName)}
	for _, x := range []struct {
		given, name string
		dst         *string
	}{{dirs.SSL, generation.CertDirName, &d.SSLDir}, {dirs.Maps, generation.MapsDirName, &d.MapsDir}, {dirs.Files, generation.FilesDirName, &d.FilesDir}} {
		if *x.dst = x.given; x.given == "" {
			*x.dst = filepath.Join(out, x.name)
		}
		if *x.dst, err = filepath.Abs(*x.dst); err != nil {
			return d, err
		}
	}
	return d, nil
}

// readOnce reads the objects once; unread are the objects the source could not read (held).
func readOnce(ctx context.Context, source config.Source, in config.Inputs, peersNS string, log *slog.Logger) (*snapshot.Objects, map[string]quarantine.Hold, error) {
	src, err := newSource(source, in, peersNS, log, nil)
	if err != nil {
		return nil, nil, err
	}
	return readSource(ctx, src)
}

// readSource is readOnce of a source already made.
func readSource(ctx context.Context, src pipeline.Source) (*snapshot.Objects, map[string]quarantine.Hold, error) {
	// The kube and etcd sources fill their caches in Run: run it until the objects are read.
	sctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = src.Run(sctx, func() {}) }()
	objs, err := src.Objects(sctx)
	cancel()
	<-ran
	var ie *snapshot.InputError
	switch {
	case err == nil:
		return objs, nil, nil
	case errors.As(err, &ie) && objs != nil:
		return objs, candidate.SourceHolds(err), nil
	}
	return nil, nil, err
}

// heldErrors are the reasons of the inputs held back (each names its object), one error each,
// in the order of their names.
func heldErrors(held map[string]quarantine.Hold) []error {
	var out []error
	for _, id := range slices.Sorted(maps.Keys(held)) {
		out = append(out, errors.New(held[id].Reason()))
	}
	return out
}

// certKeyLines are the private key lines of the certificates read, for the redactor.
func certKeyLines(cur snapshot.Inputs) []string {
	var out []string
	for _, in := range cur.List {
		if in.Kind == snapshot.KindCertificate && in.Err == nil {
			out = append(out, redact.KeyLines(in.PEM)...)
		}
	}
	return out
}
