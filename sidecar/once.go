package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/haproxy-sidecar/haproxy-sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/redact"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
)

// Once is `render` (into cfg.Out) and `validate` (into a temporary directory that is removed
// afterwards): the inputs read once, rendered, and validated with haproxy -c. What it did is
// printed to stdout.
func Once(ctx context.Context, cfg *config.Once, stdout io.Writer, env Env) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	red := newRedactor(cfg.Inputs, cfg.Source.Etcd, &config.Dataplane{})
	log, err := newLogger(cfg.Log, env.Log, red)
	if err != nil {
		return err
	}
	return red.Error(once(ctx, cfg, stdout, log, red))
}

func once(ctx context.Context, cfg *config.Once, stdout io.Writer, log *slog.Logger, red *redactor) error {
	checkOnly := cfg.Command == "validate"
	var err error
	out := cfg.Out
	if checkOnly {
		if out, err = os.MkdirTemp("", "haproxy-sidecar-validate-"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	} else if out == "" {
		return errors.New("render needs --out DIR")
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	sslDir := cfg.Dirs.SSL
	if sslDir == "" {
		sslDir = filepath.Join(out, "certs")
	}
	if sslDir, err = filepath.Abs(sslDir); err != nil {
		return err
	}
	ro := cfg.Render.Options(sslDir)
	for _, d := range []struct {
		given, name string
		dst         *string
	}{{cfg.Dirs.Maps, generation.MapsDirName, &ro.MapsDir}, {cfg.Dirs.Files, generation.FilesDirName, &ro.FilesDir}} {
		if *d.dst = d.given; d.given == "" {
			*d.dst = filepath.Join(out, d.name)
		}
		if *d.dst, err = filepath.Abs(*d.dst); err != nil {
			return err
		}
	}
	src, err := newSource(cfg.Source, cfg.Inputs, log, nil)
	if err != nil {
		return err
	}
	bo, err := snapshotOptions(cfg.Inputs)
	if err != nil {
		return err
	}
	// The kube and etcd sources fill their caches in Run: run it until the objects are read.
	sctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = src.Run(sctx, func() {}) }()
	objs, err := src.Objects(sctx)
	cancel()
	<-ran
	if err != nil {
		return err
	}
	snap, err := snapshot.Build(objs, bo)
	if err != nil {
		return err
	}
	bundle, err := render.New(ro).Render(ctx, snap)
	if err != nil {
		return err
	}
	red.Set("certificate-keys", certKeyLines(bundle.Certificates)...)
	cfgFile := filepath.Join(out, "haproxy.cfg")
	if err := writeBundle(cfgFile, sslDir, ro.MapsDir, ro.FilesDir, bundle); err != nil {
		return err
	}
	if cfg.Render.Validate {
		if !validate.Available(cfg.Render.HAProxyBin) {
			if checkOnly {
				return fmt.Errorf("cannot validate: %q not found (install HAProxy or pass --haproxy-bin)", cfg.Render.HAProxyBin)
			}
			log.Warn("haproxy not found: rendered without validation", "haproxy_bin", cfg.Render.HAProxyBin)
		} else if err := (validate.Checker{Binary: cfg.Render.HAProxyBin}).Check(ctx, cfgFile); err != nil {
			return &snapshot.InputError{Stage: snapshot.StageValidate, Ref: snap.TemplateRef,
				Err: fmt.Errorf("haproxy -c rejected the rendered configuration: %w", err)}
		}
	}
	if checkOnly {
		fmt.Fprintf(stdout, "valid: %d services, %d certificates, hash %s\n", len(snap.Services), len(snap.Certificates), bundle.Hash[:12])
	} else {
		fmt.Fprintf(stdout, "wrote %s and %d certificate(s) to %s\n", cfgFile, len(bundle.Certificates), sslDir)
		if len(bundle.Maps)+len(bundle.Files) > 0 {
			fmt.Fprintf(stdout, "wrote %d map file(s) to %s and %d file(s) to %s\n", len(bundle.Maps), ro.MapsDir, len(bundle.Files), ro.FilesDir)
		}
	}
	return nil
}

// certKeyLines are the private key lines of the certificates, for the redactor.
func certKeyLines(certs map[string][]byte) []string {
	var out []string
	for _, pem := range certs {
		out = append(out, redact.KeyLines(pem)...)
	}
	return out
}

func writeBundle(cfgFile, sslDir, mapsDir, filesDir string, b *render.Bundle) error {
	if err := os.MkdirAll(filepath.Dir(cfgFile), 0o755); err != nil {
		return err
	}
	for dir, files := range map[string]map[string][]byte{mapsDir: b.Maps, filesDir: b.Files} {
		if len(files) == 0 {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	if err := os.MkdirAll(sslDir, 0o700); err != nil {
		return err
	}
	for name, pem := range b.Certificates {
		if err := os.WriteFile(filepath.Join(sslDir, name+".pem"), pem, 0o600); err != nil {
			return fmt.Errorf("write certificate %s: %w", name, err)
		}
	}
	if err := os.WriteFile(cfgFile, b.Config, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfgFile, err)
	}
	return nil
}
