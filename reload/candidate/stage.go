package candidate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
)

// Validated makes sure c is staged as a generation and validated (haproxy -c), unless it is
// already: a *snapshot.InputError when haproxy -c rejects it (naming the template's object
// when HAProxy names none), a *failure.Error when it cannot be staged or checked.
func (b *Builder) Validated(ctx context.Context, c *Candidate) error {
	if c.Gen != nil {
		return nil
	}
	b.cfg.Exclusive.Lock()
	defer b.cfg.Exclusive.Unlock()
	var err error
	c.Gen, err = b.stage(ctx, c)
	return err
}

// stage writes the rendering as a new generation and validates it. One that fails is
// discarded, this one only: a search stages several, and the one that passed goes live.
func (b *Builder) stage(ctx context.Context, c *Candidate) (_ *generation.Generation, err error) {
	gen, err := b.cfg.Store.StageContent(c.Bundle.Content(), c.Bundle.Hash)
	if err != nil {
		return nil, &failure.Error{Stage: failure.Staging, Err: fmt.Errorf("stage generation: %w", err)}
	}
	defer func() {
		if err != nil {
			_ = b.cfg.Store.Discard(gen)
		}
	}()
	if b.cfg.Checker == nil {
		return gen, nil
	}
	checkPath, err := b.cfg.Store.CheckFile(gen)
	if err != nil {
		return nil, &failure.Error{Stage: failure.Staging, Err: fmt.Errorf("prepare validation: %w", err)}
	}
	warnings, err := b.haproxyCheck(ctx, gen, checkPath, c.Bundle.Config, c.Info.TemplateRef, c.origin)
	if err != nil {
		return nil, err
	}
	c.Warnings = warnings
	return gen, nil
}

// warningChecker is a Checker that also says what HAProxy warned about in a configuration it
// accepted.
type warningChecker interface {
	CheckWarnings(ctx context.Context, cfgPath string) ([]string, error)
}

// Check runs haproxy -c on a staged generation: a *snapshot.InputError when it rejects it
// (stage validate), a *failure.Error when it cannot run.
func (b *Builder) Check(ctx context.Context, gen *generation.Generation) error {
	if b.cfg.Checker == nil {
		return nil
	}
	checkPath, err := b.cfg.Store.CheckFile(gen)
	if err != nil {
		return &failure.Error{Stage: failure.Staging, Err: fmt.Errorf("prepare validation: %w", err)}
	}
	_, err = b.haproxyCheck(ctx, gen, checkPath, nil, snapshot.Ref{}, nil)
	return err
}

// originFinder is a Renderer that can tell which template line wrote a line of the
// configuration it renders (render.Renderer).
type originFinder interface {
	Origin(ctx context.Context, s *snapshot.Snapshot, line int) (key string, tline int, ok bool)
}

// originOf says where the templates wrote a line of the configuration rendered from objs and
// chosen (", from template KEY line M"), "" when that cannot be told: the snapshot is assembled
// and rendered again, recording who wrote what, which only a rejection needs. It is handed to
// the candidate as a function so that the sync carries only the question, not the second
// rendering's way through the inputs.
func (b *Builder) originOf(objs *snapshot.Objects, chosen []snapshot.Input) func(ctx context.Context, line int) string {
	of, ok := b.cfg.Renderer.(originFinder)
	if !ok || objs == nil {
		return nil
	}
	return func(ctx context.Context, line int) string {
		snap, err := b.cfg.Inputs.Assemble(objs, chosen)
		if err != nil {
			return ""
		}
		key, tline, ok := of.Origin(ctx, snap, line)
		if !ok {
			return ""
		}
		return fmt.Sprintf(", from template %q line %d", key, tline)
	}
}

// haproxyCheck runs haproxy -c on checkPath, gen's configuration as the check sees it, and
// returns HAProxy's warnings when the Checker says them. config is gen's configuration when the
// caller has it (nil: read when a line is quoted); a rejection is blamed on ref (the template
// set's object), and templateLine (when given) says which template line wrote the line HAProxy
// names. Nothing said quotes a line holding a secret (gen.Secret).
func (b *Builder) haproxyCheck(ctx context.Context, gen *generation.Generation, checkPath string, config []byte, ref snapshot.Ref, templateLine func(ctx context.Context, line int) string) ([]string, error) {
	var err error
	start := time.Now()
	ctx, span := tracing.Start(ctx, "validate")
	var warnings []string
	if wc, ok := b.cfg.Checker.(warningChecker); ok {
		warnings, err = wc.CheckWarnings(ctx, checkPath)
	} else {
		err = b.cfg.Checker.Check(ctx, checkPath)
	}
	tracing.End(span, err)
	b.cfg.ValidateDuration.Observe(time.Since(start).Seconds())
	if err == nil {
		for i, w := range warnings {
			warnings[i] = gen.Secret.Withhold(w)
		}
		return warnings, nil
	}
	var ce *validate.CheckError
	if !errors.As(err, &ce) {
		return nil, &failure.Error{Stage: failure.Validate, Err: fmt.Errorf("validate: %w", err)}
	}
	// The line HAProxy complains about, as the template produced it, and where the template
	// wrote it; a line holding a secret is not quoted, nor what HAProxy says of it.
	quote := ""
	if config == nil {
		config, _ = os.ReadFile(gen.ConfigFile())
	}
	if text := gen.Secret.Quote(content.ConfigName, config, ce.Line); text != "" {
		from := ""
		if templateLine != nil {
			from = templateLine(ctx, ce.Line)
		}
		if text != content.Withheld {
			text = strconv.Quote(text)
		}
		quote = fmt.Sprintf(" (rendered line %d%s: %s)", ce.Line, from, text)
	}
	return nil, &snapshot.InputError{Stage: snapshot.StageValidate, Ref: ref,
		Err: fmt.Errorf("haproxy -c rejected the rendered configuration%s: %w", quote, ce.Withhold(gen.Secret))}
}
