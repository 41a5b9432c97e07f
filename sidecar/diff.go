package sidecar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/envrecord"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/decide"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// Exit statuses of diff, like diff(1)'s: nothing would change, something would, an input would
// be held. Trouble (the inputs cannot be read) is 2, as an error.
const (
	DiffSame    = 0
	DiffChanges = 1
	DiffHeld    = 3
)

// Diff is `haproxy-sidecar diff`: the proposed state of the inputs taken through run's steps
// (held inputs, rendering, validation, the decision) against the current one, acting on
// nothing. It prints the report and returns the exit status.
func Diff(ctx context.Context, cfg *config.Diff, stdout io.Writer, env Env) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	red := newRedactor(cfg.Inputs, cfg.Source.Etcd, &config.Dataplane{})
	log, err := newLogger(cfg.Log, env.Log, red)
	if err != nil {
		return 0, err
	}
	rep, err := diff(ctx, cfg, log, red)
	if err != nil {
		return 0, red.Error(err)
	}
	var out bytes.Buffer
	if cfg.Output == "json" {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		rep.text(&out)
	}
	if err != nil {
		return 0, err
	}
	if _, err := io.WriteString(stdout, red.String(out.String())); err != nil {
		return 0, err
	}
	return rep.status(), nil
}

// diffReport is what diff found, as -o json prints it.
type diffReport struct {
	Current  string `json:"current"`  // the hash of the current rendering
	Proposed string `json:"proposed"` // the hash of the proposed one ("" when none could be made)
	// Action is what HAProxy would get: nothing, runtime, reload (or hold when no rendering
	// could be made); Why the reason for a reload.
	Action   string       `json:"action"`
	Why      string       `json:"why,omitempty"`
	Commands []string     `json:"commands,omitempty"` // the runtime API's, payloads left out
	Files    []fileDiff   `json:"files,omitempty"`
	Certs    []certChange `json:"certificates,omitempty"`
	Held     []heldInput  `json:"held,omitempty"`
	Error    string       `json:"error,omitempty"` // why no rendering could be made
	// Environment are the values templates see otherwise here than in the running sidecar
	// (--live --env-mismatch=warn): the prediction is for diff's.
	Environment []envrecord.Difference `json:"environment,omitempty"`
}

type fileDiff struct {
	Name string `json:"name"` // haproxy.cfg, maps/NAME, files/NAME
	Diff string `json:"diff"` // unified
}

type certChange struct {
	Name        string `json:"name"`
	Change      string `json:"change"`                // added, changed, removed
	Fingerprint string `json:"fingerprint,omitempty"` // SHA-256 of the proposed certificate
}

type heldInput struct {
	Input  string `json:"input"`
	Object string `json:"object"`
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
}

func (r *diffReport) status() int {
	switch {
	case len(r.Held) > 0 || r.Error != "":
		return DiffHeld
	case r.Current != r.Proposed:
		return DiffChanges
	}
	return DiffSame
}

func diff(ctx context.Context, cfg *config.Diff, log *slog.Logger, red *redactor) (*diffReport, error) {
	if cfg.Render.Validate && !validate.Available(cfg.Render.HAProxyBin) {
		return nil, fmt.Errorf("cannot validate: %q not found (install HAProxy, pass --haproxy-bin, or pass --validate=false to skip validation)", cfg.Render.HAProxyBin)
	}
	dirs, err := templateDirs(filepath.Dir(cfg.HAProxyConfig), cfg.Dirs)
	if err != nil {
		return nil, err
	}
	peers, err := peersOptions(cfg.Peers, cfg.Inputs.Namespace, cfg.Source)
	if err != nil {
		return nil, err
	}
	build, cleanup, err := stagingBuilder(cfg.Inputs, peers, cfg.Render, dirs)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	// The current state: what a running sidecar made live, and the inputs it holds good; or
	// a directory of manifests taken through the same steps. follow makes the proposal's file
	// source continue the current state's, as the running sidecar's would: the definitions
	// of objects defined twice in use there stay in use.
	var current *render.Bundle
	var q quarantine.State
	var follow func(*watcher.File)
	var envDiffs []envrecord.Difference // how diff's environment differs from the running sidecar's
	if cfg.Live != "" {
		if current, q, err = readLive(cfg.Live); err != nil {
			return nil, err
		}
		if envDiffs, err = liveEnvironment(cfg.Live, environment(cfg.Inputs), cfg.EnvMismatch, log); err != nil {
			return nil, err
		}
		choices, err := loadState[watcher.Choices](stateIn(cfg.Live), watcher.ChoicesFile)
		if err != nil {
			return nil, fmt.Errorf("--live: %w", err)
		}
		follow = func(f *watcher.File) { f.Remembered = choices }
	} else {
		src, err := newSource(config.Source{Kind: "file", Dir: cfg.Base, MaxFileSize: cfg.Source.MaxFileSize}, cfg.Inputs, "", log, nil)
		if err != nil {
			return nil, err
		}
		objs, unread, err := readSource(ctx, src)
		if err != nil {
			return nil, fmt.Errorf("read --base: %w", err)
		}
		in := build.Decode(objs)
		made := build.Make(ctx, objs, in, &q, unread, true)
		if made.Err != nil {
			return nil, fmt.Errorf("the --base state does not render: %w", made.Err)
		}
		current = made.Candidate.Bundle
		q.Accept(made.Candidate.Chosen, in)
		follow = func(f *watcher.File) { f.After(src.(*watcher.File)) }
	}

	objs, unread, err := proposedObjects(ctx, cfg, log, follow)
	if err != nil {
		return nil, err
	}
	in := build.Decode(objs)
	red.Set("certificate-keys", certKeyLines(in)...)
	made := build.Make(ctx, objs, in, &q, unread, true)
	rep := &diffReport{Current: current.Hash, Environment: envDiffs}
	for _, id := range slices.Sorted(maps.Keys(made.Held)) {
		h := made.Held[id]
		rep.Held = append(rep.Held, heldInput{Input: id, Object: h.Ref.String(), Stage: h.Stage, Reason: h.Reason()})
	}
	if made.Err != nil {
		rep.Action, rep.Error = decide.DoHold.String(), made.Err.Error()
		return rep, nil
	}
	proposed := made.Candidate.Bundle
	rep.Proposed = proposed.Hash
	rep.Files = fileDiffs(current, proposed, secretsUnknown(envDiffs))
	rep.Certs = certChanges(current.Certificates, proposed.Certificates)

	// What run would decide, HAProxy running the current rendering.
	rt := runtimeapi.New(runtimeapi.Options{SSLDir: dirs.SSLDir, MapsDir: dirs.MapsDir, Logger: log})
	st := live.State{Runs: current.Hash, Model: rt.Plan(nil, current.Config, current.Certificates, current.Maps).Loaded(),
		Good: live.Good{Bundle: current}}
	plan, why := apply.PlanFor(rt, st, proposed)
	d := decide.Decide(decide.Facts{Rendered: proposed.Hash, HAProxy: st, ReloadWhy: why, Now: time.Now()})
	rep.Action, rep.Why = d.Action.String(), d.Why
	if d.Action == decide.DoRuntime {
		rep.Commands = plan.Commands()
	}
	return rep, nil
}

// readLive reads what the sidecar with state directory dir made live, and the inputs it keeps
// as good (none when it keeps no record).
func readLive(dir string) (*render.Bundle, quarantine.State, error) {
	var q quarantine.State
	g, err := generation.LiveIn(dir)
	if err != nil {
		return nil, q, fmt.Errorf("--live: %w", err)
	}
	c, err := generation.Read(g)
	if err != nil {
		return nil, q, fmt.Errorf("--live: %w", err)
	}
	b := &render.Bundle{Config: c.Config, Certificates: c.Certs, Maps: c.Maps, Files: c.Files, Hash: c.Hash()}
	f, err := os.Open(filepath.Join(dir, quarantine.StateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return b, q, nil
	case err != nil:
		return nil, q, fmt.Errorf("--live: %w", err)
	}
	defer f.Close()
	if q, err = quarantine.Load(f); err != nil {
		return nil, q, fmt.Errorf("--live: %s: %w", quarantine.StateFile, err)
	}
	return b, q, nil
}

// stateIn reads the state files of the state directory dir, by name.
func stateIn(dir string) func(name string) ([]byte, error) {
	return func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
}

// proposedObjects are the source's objects with the -f files' objects in place of or beside
// theirs, and without those --delete names; follow prepares a file source to read them as
// the running sidecar's would.
func proposedObjects(ctx context.Context, cfg *config.Diff, log *slog.Logger, follow func(*watcher.File)) (*snapshot.Objects, map[string]quarantine.Hold, error) {
	peers, err := peersOptions(cfg.Peers, cfg.Inputs.Namespace, cfg.Source)
	if err != nil {
		return nil, nil, err
	}
	src, err := newSource(cfg.Source, cfg.Inputs, peers.Namespace, log, nil)
	if err != nil {
		return nil, nil, err
	}
	if f, ok := src.(*watcher.File); ok {
		follow(f)
	}
	objs, unread, err := readSource(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	if len(cfg.Overlays) > 0 {
		dir, err := os.MkdirTemp("", "haproxy-sidecar-diff-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(dir)
		given := map[string]string{} // the copy -> the file as -f names it
		for i, path := range cfg.Overlays {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, nil, fmt.Errorf("--file: %w", err)
			}
			copied := filepath.Join(dir, fmt.Sprintf("%03d-%s", i, filepath.Base(path)))
			if err := os.WriteFile(copied, b, 0o600); err != nil {
				return nil, nil, err
			}
			given[copied] = path
		}
		over, _, err := readOnce(ctx, config.Source{Kind: "file", Dir: dir, MaxFileSize: cfg.Source.MaxFileSize}, cfg.Inputs, "", log)
		if err != nil {
			return nil, nil, fmt.Errorf("--file: %w", err)
		}
		over.Origins = namedAsGiven(over.Origins, given)
		objs = objs.Overlay(objs.InHome(over))
	}
	for _, del := range cfg.Deletes {
		parts := strings.SplitN(del, "/", 3)
		var ok bool
		if objs, ok = objs.Delete(parts[0], parts[1], parts[2]); !ok {
			return nil, nil, fmt.Errorf("--delete %s: no such object in the proposed state", del)
		}
	}
	return objs, unread, nil
}

// namedAsGiven are origins with the paths of the copies of the -f files replaced by the
// files' own: errors point at what the operator wrote, not at a copy already deleted.
func namedAsGiven(o snapshot.Origins, given map[string]string) snapshot.Origins {
	out := make(snapshot.Origins, len(o))
	for ref, og := range o {
		if path, ok := given[og.File]; ok {
			og.File = path
		}
		out[ref] = og
	}
	return out
}

// fileDiffs are the unified diffs of the configuration, the map files and the other files.
// With secrets the running sidecar renders with and diff does not know (by name), the current
// lines the proposed files do not have are not shown: diff cannot mask values it does not know.
func fileDiffs(a, b *render.Bundle, secrets []string) []fileDiff {
	var out []fileDiff
	add := func(name string, was, is []byte) {
		if bytes.Equal(was, is) {
			return
		}
		if len(secrets) > 0 {
			was = hideLines(was, is, "[not shown: it may hold the running sidecar's "+strings.Join(secrets, ", ")+"]")
		}
		d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(was)), B: difflib.SplitLines(string(is)),
			FromFile: "current/" + name, ToFile: "proposed/" + name, Context: 3})
		out = append(out, fileDiff{Name: name, Diff: d})
	}
	add(generation.ConfigName, a.Config, b.Config)
	for _, set := range []struct {
		dir       string
		was, want map[string][]byte
	}{{generation.MapsDirName, a.Maps, b.Maps}, {generation.FilesDirName, a.Files, b.Files}} {
		names := slices.Sorted(maps.Keys(set.was))
		for name := range set.want {
			if _, ok := set.was[name]; !ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			add(set.dir+"/"+name, set.was[name], set.want[name])
		}
	}
	return out
}

// certChanges are the certificates added, changed and removed, by name, with the proposed
// certificate's fingerprint (never key material).
func certChanges(was, want map[string][]byte) []certChange {
	var out []certChange
	names := slices.Sorted(maps.Keys(want))
	for name := range was {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		w, inWas := was[name]
		n, inWant := want[name]
		switch {
		case !inWas:
			out = append(out, certChange{Name: name, Change: "added", Fingerprint: fingerprint(n)})
		case !inWant:
			out = append(out, certChange{Name: name, Change: "removed"})
		case !bytes.Equal(w, n):
			out = append(out, certChange{Name: name, Change: "changed", Fingerprint: fingerprint(n)})
		}
	}
	return out
}

// fingerprint is the SHA-256 of the first certificate in a PEM file ("" when there is none).
func fingerprint(data []byte) string {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return ""
		}
		if block.Type == "CERTIFICATE" {
			if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
				sum := sha256.Sum256(cert.Raw)
				return "sha256:" + hex.EncodeToString(sum[:])
			}
		}
	}
}

// text prints the report for a person.
func (r *diffReport) text(w io.Writer) {
	if len(r.Environment) > 0 {
		fmt.Fprintf(w, "WARNING: predicted with diff's environment, not the running sidecar's: %s\n", differences(r.Environment))
		if hidden := secretsUnknown(r.Environment); len(hidden) > 0 {
			fmt.Fprintf(w, "WARNING: the running configuration's lines that the proposed one does not have are not shown: they may hold %s\n", strings.Join(hidden, ", "))
		}
	}
	for _, f := range r.Files {
		fmt.Fprintln(w, strings.TrimRight(f.Diff, "\n"))
	}
	if len(r.Certs) > 0 {
		fmt.Fprintln(w, "certificates:")
		for _, c := range r.Certs {
			fmt.Fprintf(w, "  %s %s %s\n", c.Change, c.Name, c.Fingerprint)
		}
	}
	switch {
	case r.Error != "":
		fmt.Fprintf(w, "HAProxy would get nothing: no configuration can be made: %s\n", r.Error)
	case r.Action == decide.DoNothing.String():
		fmt.Fprintln(w, "HAProxy would get nothing: it runs this configuration already")
	case r.Action == decide.DoRuntime.String():
		fmt.Fprintf(w, "HAProxy would get %d change(s) through its runtime API, with no reload:\n", len(r.Commands))
		for _, c := range r.Commands {
			fmt.Fprintf(w, "  %s\n", c)
		}
	default:
		fmt.Fprintf(w, "HAProxy would be reloaded: %s\n", r.Why)
	}
	if len(r.Held) > 0 {
		fmt.Fprintln(w, "held back (they would not go live; the rest would):")
		for _, h := range r.Held {
			fmt.Fprintf(w, "  %s: %s\n", h.Object, h.Reason)
		}
	}
	if len(r.Environment) > 0 {
		fmt.Fprintln(w, "WARNING: this is what HAProxy would get with diff's environment; the running sidecar's differs (see the first line)")
	}
}
