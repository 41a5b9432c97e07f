package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// Budgets of one render, when Options leaves them zero.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultMaxOutput = 64 << 20
)

// Options configures a Renderer.
type Options struct {
	SSLDir string // absolute directory the certificate files will live in; templates see it as `ssldir`
	// MapsDir and FilesDir are the absolute directories the map files and the other files
	// will live in; templates see them as `mapsdir` and `filesdir` (see auxfiles.go).
	MapsDir, FilesDir string
	// Timeout bounds the time one render may take (--render-timeout); 0: DefaultTimeout.
	Timeout time.Duration
	// MaxOutput bounds the rendered configuration, and any string or list a template builds
	// on the way, in bytes (--render-max-output); 0: DefaultMaxOutput.
	MaxOutput int
}

// Bundle is the rendered output.
type Bundle struct {
	Config       []byte            // rendered haproxy.cfg
	Certificates map[string][]byte // certificate name -> PEM content, written as <ssldir>/<name>.pem
	Maps         map[string][]byte // map file name -> content, written as <mapsdir>/<name>
	Files        map[string][]byte // file name -> content, written as <filesdir>/<name>
	// Hash identifies the files: Content().Hash().
	Hash string
	// Secret are the lines of the files that hold bytes derived from a secret value (the
	// stats password, an --env-secret value): no message may quote them.
	Secret content.SecretLines
}

// Content is the bundle's files, as the generation store writes them.
func (b *Bundle) Content() content.Files {
	return content.Files{Config: b.Config, Certs: b.Certificates, Maps: b.Maps, Files: b.Files, Secret: b.Secret}
}

// Renderer renders snapshots. It caches compiled template sets (by content) and is safe for
// concurrent use.
type Renderer struct {
	opts Options
	host host // pongo2, which runs every render (host.go)

	mu    sync.Mutex
	cache map[string]*set
	lru   []string // cache keys, least recently used first

	// unshared: each file computes what it imports (tests compare with the sharing render).
	unshared bool
	// kept: the modules the files share, kept for the next render (jinja.ModuleCache).
	kept jinja.ModuleCache
	// lastSet and lastKey: a copy of the template set last compiled or found, and its setKey
	// (under mu).
	lastSet map[string]string
	lastKey string
	// services: the list templates were last given as "services" (see servicesList), under mu.
	// Never changed once made: a render may still read it.
	services []any
}

// cacheSize bounds the compiled template sets kept: the live one, the one being tried, and a
// few recent ones (an operator flipping between two versions).
const cacheSize = 8

// set is one template set (by content): its programs, one per key rendered on its own (the
// main template, and the map and file templates), compiled when first needed.
type set struct {
	mu    sync.Mutex
	roots map[string]*compiled
}

type compiled struct {
	once sync.Once
	prog *jinja.Program
	err  error        // compile error (cached too: a bad template is not recompiled per render)
	size atomic.Int64 // size of the last output: the next output buffer starts that large
}

// New returns a Renderer.
func New(opts Options) *Renderer {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	return &Renderer{opts: opts, cache: map[string]*set{}}
}

// Reused is how many modules imported inside a template (one per route, say) took a version
// kept from an earlier render instead of being computed, since r was made, of the modules keys
// (template names); without keys, every module imported with context (those at a template's
// top, taken whole, too).
func (r *Renderer) Reused(keys ...string) int {
	if len(keys) == 0 {
		return r.kept.LoopReused() + r.kept.Reused()
	}
	return r.kept.LoopReused(keys...)
}

// Computed is how many imports in loops of the modules keys computed them (not kept, or no
// kept one read the same) since the renderer was made; with Reused, the imports of a part per
// item inside a block taken whole are neither (the HTTPRoute example's route.j2 in block.j2).
func (r *Renderer) Computed(keys ...string) int { return r.kept.LoopComputed(keys...) }

// Keys of the template set named tests.NAME.yaml are tests of the templates (see package
// candidate), not templates.
const (
	TestPrefix = "tests."
	TestSuffix = ".yaml"
)

// IsTest reports whether a template key is a test of the templates.
func IsTest(key string) bool {
	return strings.HasPrefix(key, TestPrefix) && strings.HasSuffix(key, TestSuffix) && len(key) > len(TestPrefix)+len(TestSuffix)
}

// withoutTests is the template set without its tests (srcs itself when it has none).
func withoutTests(srcs map[string]string) map[string]string {
	has := false
	for k := range srcs {
		has = has || IsTest(k)
	}
	if !has {
		return srcs
	}
	out := make(map[string]string, len(srcs))
	for k, v := range srcs {
		if !IsTest(k) {
			out[k] = v
		}
	}
	return out
}

// Render renders s. Bad templates, template runtime errors and exceeded budgets are
// *snapshot.InputError with Stage render and the template's Ref (Key set to the template key
// at fault), line and column; a value from the data that would start a new line is an
// *snapshot.InputError whose Ref is the object it came from (see UnsafeValueError). When ctx
// is done, rendering stops and the error wraps ctx.Err(); what the renderer keeps from render
// to render (iterations, modules) that this render did not reach stays kept for the next one
// (a rendering ahead cut short by the next change).
func (r *Renderer) Render(ctx context.Context, s *snapshot.Snapshot) (*Bundle, error) {
	return r.render(ctx, s, false)
}

// RenderApart renders s as Render does, beside the renders of the syncs (a test in the config:
// its objects beside the cluster's): it takes the modules the syncs' renders kept (a route's
// part whose reads are the same), and leaves them as they were for the next sync; what it
// computes serves the renders apart after it until the next sync's render (jinja.Modules.Apart).
func (r *Renderer) RenderApart(ctx context.Context, s *snapshot.Snapshot) (*Bundle, error) {
	return r.render(ctx, s, true)
}

func (r *Renderer) render(ctx context.Context, s *snapshot.Snapshot, apart bool) (*Bundle, error) {
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
	srcs = withoutTests(srcs)
	if _, ok := srcs[mainKey]; !ok {
		return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(mainKey),
			Err: fmt.Errorf("there is no template key %q (keys: %s)", mainKey, strings.Join(sortedKeys(srcs), ", "))}
	}
	c := r.compile(srcs, mainKey)
	if c.err != nil {
		return nil, r.inputError(c.err, s, ref, mainKey)
	}
	aux, err := auxFiles(srcs, mainKey)
	if err != nil {
		var ae *auxNameError
		if errors.As(err, &ae) {
			return nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(ae.key), Err: ae.err}
		}
		return nil, err
	}

	certs, names, err := certificateFiles(s.Certificates)
	if err != nil {
		return nil, err
	}

	// One time budget for the whole bundle; the output budget bounds each file.
	lim := jinja.Limits{Deadline: time.Now().Add(r.opts.Timeout), Budget: r.opts.Timeout.String(), MaxOutput: r.opts.MaxOutput}
	vars := r.context(s, names)
	// The files share what they import with context (the Ingress example's routes: computed
	// once, not once per file).
	mods := &jinja.Modules{Across: &r.kept, Apart: apart}
	if r.unshared {
		mods = nil
	}
	res, err := r.run(ctx, c, vars, mods, lim, false)
	switch {
	case mods == nil:
	case apart:
		r.kept.EndApart()
	case err != nil && ctx.Err() != nil:
		r.kept.EndCut() // cut short: what it did not reach stays kept for the next render
	default:
		r.kept.Sweep() // the versions of modules imported in loops that this render did not use
	}
	if err != nil {
		return nil, r.renderError(ctx, notWatched(err, vars), s, ref, mainKey)
	}
	out := res.Bytes
	if len(out) > 0 && out[len(out)-1] != '\n' {
		// HAProxy warns about a last line without a newline.
		out = append(out, '\n')
	}
	sum := hashConfig(out)
	b := &Bundle{Config: out, Certificates: certs}
	b.Secret.Add(content.ConfigName, out, res.Secret)
	lastRendered := -1
	for i, a := range aux {
		if a.render {
			lastRendered = i
		}
	}
	for i, a := range aux {
		data := []byte(srcs[a.key])
		if i == lastRendered && mods != nil {
			mods.Last()
		}
		if a.render {
			ac := r.compile(srcs, a.key)
			if ac.err != nil {
				return nil, r.inputError(ac.err, s, ref, a.key)
			}
			res, err := r.run(ctx, ac, vars, mods, lim, false)
			if err != nil {
				return nil, r.renderError(ctx, notWatched(err, vars), s, ref, a.key)
			}
			data = res.Bytes
			dir := generationFilesDir
			if a.kind == auxMap {
				dir = generationMapsDir
			}
			b.Secret.Add(dir+"/"+a.name, data, res.Secret)
		}
		b.addFile(a.kind, a.name, data)
	}
	b.Hash = sum(b.Content())
	return b, nil
}

// hashConfig hashes config beside the rest of the render (the map files, rendered after it):
// the hash of a large configuration is then not on the way of the sync. The function it
// returns gives the hash of the files f, whose Config is config: Content().Hash().
func hashConfig(config []byte) func(f content.Files) string {
	h := content.NewHasher()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Config(config)
	}()
	return func(f content.Files) string {
		<-done
		return h.Sum(f)
	}
}

// certificateFiles names the bundle's certificate files. Here, where the files are made, a bad
// name is reported against the object the certificate came from (the generation store only
// keeps each file inside its directory).
func certificateFiles(in []snapshot.Certificate) (map[string][]byte, []string, error) {
	certs := make(map[string][]byte, len(in))
	names := make([]string, 0, len(in))
	for _, cert := range in {
		if err := content.CheckCertName(cert.Name); err != nil {
			return nil, nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: cert.Ref, Err: fmt.Errorf("%w: it cannot be a file name", err)}
		}
		if _, dup := certs[cert.Name]; dup {
			return nil, nil, &snapshot.InputError{Stage: snapshot.StageRender, Ref: cert.Ref, Err: fmt.Errorf("two certificates are named %q", cert.Name)}
		}
		certs[cert.Name] = cert.PEM
		names = append(names, cert.Name)
	}
	return certs, names, nil
}

// addFile puts an auxiliary file in the bundle: a map, whose last line gets its newline, or
// another file as it is.
func (b *Bundle) addFile(kind auxKind, name string, data []byte) {
	if kind != auxMap {
		if b.Files == nil {
			b.Files = map[string][]byte{}
		}
		b.Files[name] = data
		return
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n') // a map file is lines
	}
	if b.Maps == nil {
		b.Maps = map[string][]byte{}
	}
	b.Maps[name] = data
}

// Where the generation puts the map files and the other files: their names in
// content.SecretLines.
const (
	generationMapsDir  = "maps"
	generationFilesDir = "files"
)

// run renders one compiled template with vars (trace: recording who wrote what). Only a
// render within the budget sets the next buffer's size: after an oversized render is
// rejected, the next render starts small again.
func (r *Renderer) run(ctx context.Context, c *compiled, vars map[string]any, mods *jinja.Modules, lim jinja.Limits, trace bool) (jinja.Output, error) {
	// The buffer starts as large as the last output of this template (plus a margin), so
	// that it is not grown and copied on the way.
	hint := c.size.Load()
	buf := make([]byte, 0, hint+hint/16+4096)
	out, err := r.host.run(&job{ctx: ctx, prog: c.prog, vars: vars, mods: mods, lim: lim, buf: buf, trace: trace})
	if err != nil {
		return jinja.Output{}, err
	}
	c.size.Store(int64(len(out.Bytes)))
	return out, nil
}

// Origin says which template key and line wrote line (1-based) of the haproxy.cfg s renders
// to: its first character that is not a space, or the line's start. It renders s again,
// recording who wrote what (which a render does not do: it would cost every render for the
// rare error that needs it), so it is for explaining a rendering refused, made from the same
// snapshot. ok is false when the line is not there or s does not render.
func (r *Renderer) Origin(ctx context.Context, s *snapshot.Snapshot, line int) (key string, tline int, ok bool) {
	srcs, mainKey := s.Templates, s.TemplateKey
	if srcs == nil {
		srcs, mainKey = templates.Default, templates.DefaultKey
	}
	srcs = withoutTests(srcs)
	c := r.compile(srcs, mainKey)
	if c.err != nil {
		return "", 0, false
	}
	names := make([]string, len(s.Certificates))
	for i, cert := range s.Certificates {
		names[i] = cert.Name
	}
	lim := jinja.Limits{Deadline: time.Now().Add(r.opts.Timeout), Budget: r.opts.Timeout.String(), MaxOutput: r.opts.MaxOutput}
	res, err := r.run(ctx, c, r.context(s, names), &jinja.Modules{}, lim, true)
	if err != nil || line <= 0 {
		return "", 0, false
	}
	out := res.Bytes
	start := 0
	for i := 1; i < line; i++ {
		nl := bytes.IndexByte(out[start:], '\n')
		if nl < 0 {
			return "", 0, false
		}
		start += nl + 1
	}
	if start >= len(out) {
		return "", 0, false
	}
	at := start
	for at < len(out) && (out[at] == ' ' || out[at] == '\t') {
		at++
	}
	if at == len(out) || out[at] == '\n' {
		at = start
	}
	return res.Origin(at)
}

// renderError is the error of a render that failed: ctx's when it ended, else the input
// error naming the template (key is the template rendered on its own).
func (r *Renderer) renderError(ctx context.Context, err error, s *snapshot.Snapshot, ref func(string) snapshot.Ref, key string) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return fmt.Errorf("render: %w", ctxErr)
	}
	return r.inputError(err, s, ref, key)
}

// context is what templates see. (Keep it the one place the context is built.)
func (r *Renderer) context(s *snapshot.Snapshot, certNames []string) map[string]any {
	user := s.Stats.Username
	if user == "" {
		user = "stats"
	}
	var password any = jinja.NewUndefined(errStatsPassword)
	if s.Stats.PasswordSet {
		password = jinja.Secret(s.Stats.Password)
	}
	var env any = s.Env
	if s.Env == nil {
		env = map[string]string{}
	} else if len(s.SecretEnv) > 0 {
		env = secretEnv(s.Env, s.SecretEnv)
	}
	services := r.servicesList(s.Services)
	// resources.<name>: each watched resource (--watch) with its lookups (snapshot.Resource).
	resources := make(map[string]any, len(s.Resources))
	for _, res := range s.Resources {
		resources[res.Name] = res.Value
	}
	return map[string]any{
		"services":     services,
		"certificates": certNames,
		"ssldir":       r.opts.SSLDir,
		"mapsdir":      r.opts.MapsDir,
		"filesdir":     r.opts.FilesDir,
		"stats":        map[string]any{"username": user, "password": password},
		"env":          env,
		"resources":    resources,
		"peers":        s.Peers.Value(),
	}
}

// servicesList is recs as templates read them: a list of the data ([]any: the engine's lists
// hold any value), never nil. The list of the last render when it holds the same records
// (a render of the same snapshot, or of another whose services did not change: a template,
// certificate or watched resource's change), so that a render does not copy 10,000 services
// (160 KB) again; comparing them costs no allocation.
func (r *Renderer) servicesList(recs []*record.Record) []any {
	r.mu.Lock()
	last := r.services
	r.mu.Unlock()
	if sameRecords(last, recs) {
		return last
	}
	list := make([]any, len(recs))
	for i, svc := range recs {
		list[i] = svc
	}
	r.mu.Lock()
	r.services = list
	r.mu.Unlock()
	return list
}

// sameRecords reports whether list holds exactly recs (the same records, in order).
func sameRecords(list []any, recs []*record.Record) bool {
	if list == nil || len(list) != len(recs) {
		return false
	}
	for i, rec := range recs {
		if list[i] != any(rec) {
			return false
		}
	}
	return true
}

// secretEnv is env as templates see it when some of its values are secret (the names in
// secret): those are marked as such (jinja.Secret).
func secretEnv(env map[string]string, secret []string) map[string]any {
	out := make(map[string]any, len(env))
	for k, v := range env {
		out[k] = v
		if slices.Contains(secret, k) {
			out[k] = jinja.Secret(v)
		}
	}
	return out
}

// notWatched adds to the use of resources.NAME that is not there what gives it: resources
// come from --watch only (Jinja2 says "'dict object' has no attribute 'ingresses'", which
// does not say why).
func notWatched(err error, vars map[string]any) error {
	var je *jinja.Error
	var ue *jinja.UndefinedError
	if !errors.As(err, &je) || !errors.As(je.Err, &ue) {
		return err
	}
	resources, _ := vars["resources"].(map[string]any)
	name, ok := ue.Name.(string)
	if of, isMap := ue.Of.(map[string]any); !ok || !isMap || reflect.ValueOf(of).UnsafePointer() != reflect.ValueOf(resources).UnsafePointer() {
		return err
	}
	watched := "none is watched"
	if len(resources) > 0 {
		watched = "watched: " + strings.Join(slices.Sorted(maps.Keys(resources)), ", ")
	}
	cp := *je
	cp.Err = fmt.Errorf("%w: templates see the resources --watch names only (%s): add --watch %s (or to HAPROXY_SIDECAR_WATCH)",
		ue, watched, watchspec.Suggest(name))
	return &cp
}

// errStatsPassword is what printing stats.password says when no password is set: there is
// no built-in default password.
var errStatsPassword = errors.New("the template uses stats.password but no statistics password is set: set STATISTICS_PASSWORD (there is no built-in default password), or guard the stats section with {% if stats.password %}")

// inputError turns an engine error into the InputError the pipeline reports.
func (r *Renderer) inputError(err error, s *snapshot.Snapshot, ref func(string) snapshot.Ref, mainKey string) error {
	var je *jinja.Error
	if !errors.As(err, &je) {
		return &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(mainKey), Err: err}
	}
	cause := je.Err
	var uv *jinja.UnsafeValueError
	if errors.As(cause, &uv) {
		return unsafeValue(s, uv, ref(je.Template), je.Line, je.Col)
	}
	var le *jinja.LimitError
	if errors.As(cause, &le) {
		if le.Kind == "time" {
			cause = fmt.Errorf("rendering took longer than its time budget of %s (--render-timeout): a loop that does not end, or more work than the budget allows", r.opts.Timeout)
		} else {
			cause = fmt.Errorf("the rendered configuration (or a value built on the way) is larger than its output budget of %s (--render-max-output)", formatBytes(r.opts.MaxOutput))
		}
	}
	return &snapshot.InputError{Stage: snapshot.StageRender, Ref: ref(je.Template), Line: je.Line, Col: je.Col, Err: cause}
}

func formatBytes(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// setKey identifies a template set by content, for the compile cache (in memory only).
func setKey(srcs map[string]string) string {
	h := sha256.New()
	var n [8]byte
	write := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	for _, k := range sortedKeys(srcs) {
		write(k)
		write(srcs[k])
	}
	return string(h.Sum(nil))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compile returns the program of the template set srcs that renders the key root, from the
// cache or compiled now. The renderer's lock is not held while compiling, so renders of cached
// sets go on meanwhile, and different sets compile in parallel; concurrent renders of the same
// new program compile it once.
func (r *Renderer) compile(srcs map[string]string, root string) *compiled {
	key := r.setKey(srcs)
	r.mu.Lock()
	st, ok := r.cache[key]
	if ok {
		r.touch(key)
	} else {
		st = &set{roots: map[string]*compiled{}}
		r.cache[key] = st
		r.lru = append(r.lru, key)
		if len(r.lru) > cacheSize {
			delete(r.cache, r.lru[0])
			r.lru = r.lru[1:]
		}
	}
	r.mu.Unlock()
	st.mu.Lock()
	c, ok := st.roots[root]
	if !ok {
		c = &compiled{}
		st.roots[root] = c
	}
	st.mu.Unlock()
	c.once.Do(func() {
		c.prog, c.err = jinja.Compile(srcs, root, jinja.Options{Filters: extraFilters()})
	})
	return c
}

// setKey is setKey(srcs), that of the last set when srcs holds the same strings: each sync
// renders the main template and each map file of the set the source decoded again, whose
// texts (tens of kB) are the same strings as at the last sync, not hashed again each time.
func (r *Renderer) setKey(srcs map[string]string) string {
	r.mu.Lock()
	if sameStrings(r.lastSet, srcs) {
		key := r.lastKey
		r.mu.Unlock()
		return key
	}
	r.mu.Unlock()
	key := setKey(srcs)
	r.mu.Lock()
	// A copy: the caller's map may change after (a text set anew in it).
	r.lastSet, r.lastKey = maps.Clone(srcs), key
	r.mu.Unlock()
	return key
}

// sameStrings says whether a and b map the same keys to the same strings: the same bytes in
// memory, which a Go string never changes (so the same text; the same text elsewhere in
// memory is not the same here).
func sameStrings(a, b map[string]string) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for k, v := range b {
		w, ok := a[k]
		if !ok || len(w) != len(v) || unsafe.StringData(w) != unsafe.StringData(v) {
			return false
		}
	}
	return true
}

func (r *Renderer) touch(key string) {
	for i, k := range r.lru {
		if k == key {
			r.lru = append(append(r.lru[:i:i], r.lru[i+1:]...), key)
			return
		}
	}
}
