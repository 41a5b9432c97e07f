// Package render turns a snapshot.Snapshot into a Bundle: haproxy.cfg rendered from the
// template set (Jinja2 or pongo2 syntax) and the certificate files.
//
// How templates run: the template text is translated (translate.go) into pongo2 source in
// which every statement and {{ expression }} is one of our own pongo2 tags; the tags evaluate
// Jinja2 expressions with Python semantics (ast.go, values.go, filters.go, methods.go).
// pongo2 parses the translated document (nesting, whitespace control, include) and executes
// it. This gives Jinja2 templates from the original project (loop.index, dict.items(),
// "%d" % x, ~, slicing, method calls, for-if filters...) unchanged, and keeps pongo2's own
// syntax (forloop.Counter, |default:"x", &&) working too. See JINJA2.md.
package render

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// Options configures a Renderer.
type Options struct {
	SSLDir string // absolute directory the certificate files will live in; templates see it as `ssldir`
}

// Bundle is the rendered output.
type Bundle struct {
	Config       []byte            // rendered haproxy.cfg
	Certificates map[string][]byte // certificate name -> PEM content, written as <ssldir>/<name>.pem
	Hash         string            // hex sha256 over Config and the sorted certificate names+contents
}

// Renderer renders snapshots. It caches compiled template sets (by content) and is safe for
// concurrent use.
type Renderer struct {
	opts Options

	mu    sync.Mutex
	cache map[string]*compiled
	lru   []string // cache keys, least recently used first
}

// cacheSize bounds the compiled template sets kept: the live one, the one being tried, and a
// few recent ones (an operator flipping between two versions).
const cacheSize = 8

type compiled struct {
	once sync.Once
	tpl  *pongo2.Template
	prog *program
	err  *templateError // compile error (cached too: a bad template is not recompiled per render)
	size atomic.Int64   // size of the last output: the next output buffer starts that large
}

// New returns a Renderer.
func New(opts Options) *Renderer {
	return &Renderer{opts: opts, cache: map[string]*compiled{}}
}

// Render renders s. Bad templates and template runtime errors are *snapshot.InputError with
// Stage render, the template's Ref (Key set to the template key at fault), line and column.
func (r *Renderer) Render(s *snapshot.Snapshot) (*Bundle, error) {
	if s == nil {
		return nil, errors.New("render: nil snapshot")
	}
	srcs, mainKey := s.Templates, s.TemplateKey
	ref := func(key string) snapshot.Ref {
		rf := s.TemplateRef
		rf.Key = key
		return rf
	}
	if srcs == nil {
		srcs, mainKey = templates.Default, templates.DefaultKey
		ref = func(key string) snapshot.Ref { return snapshot.Ref{Kind: "File", Name: "templates/" + key} }
	}
	if _, ok := srcs[mainKey]; !ok {
		return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(mainKey),
			Err: fmt.Errorf("there is no template key %q (keys: %s)", mainKey, strings.Join(sortedKeysStr(srcs), ", "))}
	}
	c := r.compile(srcs, mainKey)
	if c.err != nil {
		return nil, inputError(ref, c.err)
	}

	certs := make(map[string][]byte, len(s.Certificates))
	names := make([]string, 0, len(s.Certificates))
	for _, cert := range s.Certificates {
		// The same rules as generation.ValidCertName, reported here against the object the
		// certificate came from.
		if cert.Name == "" || strings.HasPrefix(cert.Name, ".") || strings.ContainsAny(cert.Name, "/\\\x00\n\r") {
			return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: cert.Ref, Err: fmt.Errorf("certificate name %q cannot be a file name", cert.Name)}
		}
		if _, dup := certs[cert.Name]; dup {
			return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: cert.Ref, Err: fmt.Errorf("two certificates are named %q", cert.Name)}
		}
		certs[cert.Name] = cert.PEM
		names = append(names, cert.Name)
	}

	rs := &renderState{}
	rs.out.Grow(int(c.size.Load()) + int(c.size.Load()/16) + 4096)
	out, err := execute(c, r.context(s, names, rs), rs)
	if err != nil {
		var te *templateError
		if errors.As(err, &te) {
			return nil, inputError(ref, te)
		}
		return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(mainKey), Err: err}
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		// HAProxy warns about a last line without a newline.
		out = append(out, '\n')
	}
	c.size.Store(int64(len(out)))
	return &Bundle{Config: out, Certificates: certs, Hash: bundleHash(out, certs)}, nil
}

func inputError(ref func(string) snapshot.Ref, te *templateError) *snapshot.InputError {
	return &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(te.key), Line: te.line, Col: te.col, Err: te.err}
}

func (r *Renderer) context(s *snapshot.Snapshot, certNames []string, rs *renderState) pongo2.Context {
	user := s.Stats.Username
	if user == "" {
		user = "stats"
	}
	var password any = statsPasswordUnset
	if s.Stats.PasswordSet {
		password = s.Stats.Password
	}
	env := s.Env
	if env == nil {
		env = map[string]string{}
	}
	services := s.Services
	if services == nil {
		services = []map[string]any{}
	}
	return pongo2.Context{
		"services":     services,
		"certificates": certNames,
		"ssldir":       r.opts.SSLDir,
		"stats":        map[string]any{"username": user, "password": password},
		"env":          env,
		renderStateKey: rs,
	}
}

// execute runs the compiled template, turning a panic into an error.
func execute(c *compiled, ctx pongo2.Context, rs *renderState) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out = nil
			if e, ok := p.(error); ok && errors.Is(e, errStatsPassword) {
				err = errStatsPassword
				return
			}
			err = fmt.Errorf("rendering stopped with an internal error (panic: %v); the template uses a construct the renderer cannot handle", p)
		}
	}()
	// The main template's _root tag writes into rs.out (pre-sized); pongo2's own buffer
	// only ever holds what is outside it (nothing).
	rest, err := c.tpl.ExecuteBytes(ctx)
	if err != nil {
		return nil, c.prog.convertErr(err)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("internal: %d bytes rendered outside the root", len(rest))
	}
	return rs.out.Bytes(), nil
}

// bundleHash is sha256 over the config and the certificates in name order, each part length
// prefixed so that no two bundles share an encoding.
func bundleHash(config []byte, certs map[string][]byte) string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write(config)
	names := make([]string, 0, len(certs))
	for name := range certs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		write([]byte(name))
		write(certs[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// setKey identifies a template set by content.
func setKey(srcs map[string]string, mainKey string) string {
	h := sha256.New()
	var n [8]byte
	write := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	write(mainKey)
	for _, k := range sortedKeysStr(srcs) {
		write(k)
		write(srcs[k])
	}
	return string(h.Sum(nil))
}

// compile returns the compiled template set, from the cache or compiled now. The renderer's
// lock is not held while compiling, so renders of cached sets go on meanwhile; concurrent
// renders of the same new set compile it once.
func (r *Renderer) compile(srcs map[string]string, mainKey string) *compiled {
	key := setKey(srcs, mainKey)
	r.mu.Lock()
	c, ok := r.cache[key]
	if ok {
		r.touch(key)
	} else {
		c = &compiled{}
		r.cache[key] = c
		r.lru = append(r.lru, key)
		if len(r.lru) > cacheSize {
			delete(r.cache, r.lru[0])
			r.lru = r.lru[1:]
		}
	}
	r.mu.Unlock()
	c.once.Do(func() {
		res := compileSet(srcs, mainKey)
		c.tpl, c.prog, c.err = res.tpl, res.prog, res.err
	})
	return c
}

func (r *Renderer) touch(key string) {
	for i, k := range r.lru {
		if k == key {
			r.lru = append(append(r.lru[:i:i], r.lru[i+1:]...), key)
			return
		}
	}
}

// compileMu serializes compilation: pongo2 has data races at compile time (TemplateSet state,
// FromFile), and our tags read the program being compiled from a package variable.
var compileMu sync.Mutex

// maxLoads bounds how many templates one compile may load (includes are parsed at every
// place they are included).
const maxLoads = 2000

func compileSet(srcs map[string]string, mainKey string) *compiled {
	compileMu.Lock()
	defer compileMu.Unlock()
	prog := &program{srcs: srcs, units: map[string]*unit{}}
	u := newUnit(mainKey, srcs[mainKey])
	u.main = true
	prog.units[mainKey] = u
	if err := prog.translate(u, nil); err != nil {
		return &compiled{err: asTemplateError(err, mainKey)}
	}
	set := newSet(prog)
	prog.set = set
	compiling = prog
	defer func() { compiling = nil }()
	tpl, err := set.FromFile(mainKey)
	if err != nil {
		return &compiled{err: asTemplateError(prog.convertErr(err), mainKey)}
	}
	c := &compiled{tpl: tpl, prog: prog}
	return c
}

// newSet is a pongo2 template set that loads templates from prog only (no file system) and
// bans the tags that read files (ssi) or make output non-deterministic (now, lorem). The
// translator never emits them, so templates cannot reach them anyway; the bans keep them out
// even if it ever did.
func newSet(prog *program) *pongo2.TemplateSet {
	set := pongo2.NewSet("haproxy-sidecar", &mapLoader{prog: prog})
	for _, tag := range []string{"ssi", "now", "lorem"} {
		if err := set.BanTag(tag); err != nil {
			panic(err)
		}
	}
	return set
}

func asTemplateError(err error, mainKey string) *templateError {
	var te *templateError
	if errors.As(err, &te) {
		return te
	}
	return &templateError{key: mainKey, err: err}
}

// convertErr turns a pongo2 error into a templateError located in the original template.
func (prog *program) convertErr(err error) error {
	var pe *pongo2.Error
	if !errors.As(err, &pe) {
		return err
	}
	if pe.OrigError != nil {
		var te *templateError
		if errors.As(pe.OrigError, &te) {
			return te
		}
	}
	msg := "error"
	if pe.OrigError != nil {
		msg = pe.OrigError.Error()
	}
	if pe.Sender == "fromfile" && prog.loadErr != nil {
		msg = prog.loadErr.Error()
	}
	if pe.Sender != "" {
		msg = fmt.Sprintf("%s (pongo2 %s)", msg, pe.Sender)
	}
	// The token knows which template it is from; pe.Filename can name an included template
	// while Line is the include tag's in the including one.
	key := pe.Filename
	if pe.Token != nil && pe.Token.Filename != "" {
		key = pe.Token.Filename
	}
	u := prog.units[key]
	if u == nil {
		return &templateError{key: key, err: errors.New(msg)}
	}
	if pe.Line <= 0 {
		return &templateError{key: u.key, err: errors.New(msg)}
	}
	return u.errAt(u.origOffset(pe.Line, pe.Column), errors.New(msg))
}

// mapLoader serves the translated template keys to pongo2: no file system access.
type mapLoader struct{ prog *program }

func (l *mapLoader) Abs(base, name string) string { return name }

func (l *mapLoader) Get(path string) (io.Reader, error) {
	l.prog.gets++
	if l.prog.gets > maxLoads {
		l.prog.loadErr = fmt.Errorf("templates are included more than %d times in total", maxLoads)
		return nil, l.prog.loadErr
	}
	u, ok := l.prog.units[path]
	if !ok || u.state != 2 {
		l.prog.loadErr = fmt.Errorf("there is no template key %q", path)
		return nil, l.prog.loadErr
	}
	return strings.NewReader(u.out), nil
}
