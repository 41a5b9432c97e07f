package render

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
)

// pongo2 is the engine templates run on; package jinja is the language they are written in.
//
// Every render is a pongo2 execution: a pongo2 template of one tag, {% haproxy_sidecar_jinja %},
// in a TemplateSet of its own, executes with the render's job in its context; pongo2 calls
// the tag, which runs the compiled Jinja2 program of the job and hands its output to pongo2's
// writer. pongo2 also runs the filters written its way (|default:"x", |floatformat...; see
// package jinja). What pongo2 cannot do is read Jinja2 (s[1:], ~, **, filters with several
// arguments, loop.*): translating templates into pongo2 tags needed per-compile state in
// process-wide variables and positions mapped back through the translation, so the Jinja2
// text is parsed and evaluated by package jinja, inside that one tag. No per-template state
// passes through pongo2: the tag is registered once (registerHostTag) and never changed.

// hostTag is the tag every render runs.
const hostTag = "haproxy_sidecar_jinja"

// jobKey is where the render's job travels in pongo2's context (a valid identifier no
// template can reach: the pongo2 template is the one tag).
const jobKey = "haproxy_sidecar_job"

// registerHostTag adds hostTag to pongo2's tags, once per process: pongo2 v6 keeps its tags
// in one process-wide table (RegisterTag is all it has), unlocked, read when a template is
// parsed. host.template calls it before it parses the host template, the only pongo2
// template the sidecar parses, so the table is complete before anyone reads it.
var registerHostTag = sync.OnceValue(func() error {
	err := pongo2.RegisterTag(hostTag, func(*pongo2.Parser, *pongo2.Token, *pongo2.Parser) (pongo2.INodeTag, *pongo2.Error) {
		return hostNode{}, nil
	})
	if err != nil {
		return fmt.Errorf("register the pongo2 tag %s: %w", hostTag, err)
	}
	return nil
})

// job is one render: the program, its context and budgets, and where its output goes.
type job struct {
	ctx   context.Context
	prog  *jinja.Program
	vars  map[string]any
	mods  *jinja.Modules // shared by the files of one bundle
	lim   jinja.Limits
	buf   []byte
	trace bool // record which statement wrote what (Renderer.Origin)
	out   jinja.Output
	err   error
}

// hostNode runs the job pongo2's context carries.
type hostNode struct{}

func (hostNode) Execute(ec *pongo2.ExecutionContext, w pongo2.TemplateWriter) *pongo2.Error {
	j, ok := ec.Public[jobKey].(*job)
	if !ok || j.prog == nil {
		return ec.OrigError(fmt.Errorf("render: no job in the context"), nil)
	}
	out, err := j.prog.RenderSharing(j.ctx, j.vars, j.lim, j.buf, j.mods, j.trace)
	if err != nil {
		j.err = err // returned as it is (pongo2 would wrap it)
		return nil
	}
	j.out = out
	if _, err := w.Write(out.Bytes); err != nil {
		return ec.OrigError(err, nil)
	}
	return nil
}

// host is the pongo2 side of a Renderer: its TemplateSet and the one-tag template.
type host struct {
	once sync.Once
	tpl  *pongo2.Template
	err  error
}

func (h *host) template() (*pongo2.Template, error) {
	h.once.Do(func() {
		if h.err = registerHostTag(); h.err != nil {
			return
		}
		set := pongo2.NewSet("haproxy-sidecar", noLoader{})
		h.tpl, h.err = set.FromString("{% " + hostTag + " %}")
	})
	return h.tpl, h.err
}

// run executes j through pongo2: the output as pongo2 wrote it, with what the render knows
// of where its bytes came from.
func (h *host) run(j *job) (jinja.Output, error) {
	tpl, err := h.template()
	if err != nil {
		return jinja.Output{}, fmt.Errorf("render: pongo2 host template: %w", err)
	}
	var out adopt
	if err := tpl.ExecuteWriterUnbuffered(pongo2.Context{jobKey: j}, &out); err != nil {
		return jinja.Output{}, fmt.Errorf("render: %w", err)
	}
	if j.err != nil {
		return jinja.Output{}, j.err
	}
	res := j.out
	res.Bytes = out.b
	return res, nil
}

// adopt is the writer pongo2 writes the output to. Unlike io.Writer's contract, it keeps
// the first slice written rather than copying it: the slice is the job's own output buffer,
// written once, so a 10 MB configuration is not copied (nor held twice) on its way out.
type adopt struct{ b []byte }

func (a *adopt) Write(p []byte) (int, error) {
	if a.b == nil {
		a.b = p
	} else {
		a.b = append(a.b, p...)
	}
	return len(p), nil
}

// noLoader: the host template set reads no file.
type noLoader struct{}

func (noLoader) Abs(base, name string) string { return name }
func (noLoader) Get(path string) (io.Reader, error) {
	return nil, fmt.Errorf("render: templates are not read from files (%s)", path)
}
