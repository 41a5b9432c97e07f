package candidate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/failure"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

// Tests of the templates: keys of the template set named tests.NAME.yaml, each with the
// objects the test adds to or puts in place of the inputs, and what the rendering must be:
//
//	objects:            # manifests, as kubectl apply -f takes them
//	- apiVersion: v1
//	  kind: ConfigMap
//	  metadata: {name: services}
//	  data: {web: '{"namespace": "demo", "selector": {"app": "web"}, "ports": [8080]}'}
//	expect:
//	- contains: "backend be_web"          # in haproxy.cfg, or in file: maps/NAME, files/NAME
//	- notContains: "be_api"
//	- matches: 'server \S+ 10\.0\.0\.1:8080'
//	- map: {file: hosts.map, key: web.localhost, value: be_web}
//	- valid: true                         # haproxy -c passes
//	- deterministic: true                 # rendered twice, the same bytes
//	peers: {selector: app=haproxy, local: haproxy-0}   # optional: the replicas (`peers`)
//	clusters:                                          # optional: several clusters' pods
//	  west: [{kind: Pod, ...}]                         # and watched objects, by cluster
//
// A template set whose tests fail is held like a broken one, naming the test and the
// assertion; `validate` runs them offline and prints each one's outcome.

// Test is one test of the templates.
type Test struct {
	Name    string   `json:"-"`
	Key     string   `json:"-"`
	Objects []any    `json:"objects"`
	Expect  []Expect `json:"expect"`
	// Peers, when set, say which of the objects' pods are the HAProxy replicas in this test,
	// as --peers... do for the sidecar (whose own are used otherwise).
	Peers *TestPeers `json:"peers,omitempty"`
	// Clusters, when set, are the pods and watched objects of named clusters, as the kube
	// source over several clusters gives them (pod.cluster, a service's clusters list,
	// resources.X.by_cluster).
	Clusters map[string][]any `json:"clusters,omitempty"`
	// objectsLine and expectLines are where the objects and each assertion are written in
	// the key (0: unknown), for errors.
	objectsLine int
	expectLines []int
}

// Expect is one assertion on the rendering.
type Expect struct {
	// File is what is looked at: haproxy.cfg (default), maps/NAME or files/NAME.
	File          string    `json:"file,omitempty"`
	Contains      string    `json:"contains,omitempty"`
	NotContains   string    `json:"notContains,omitempty"`
	Matches       string    `json:"matches,omitempty"`
	Map           *MapEntry `json:"map,omitempty"`
	Valid         bool      `json:"valid,omitempty"`
	Deterministic bool      `json:"deterministic,omitempty"`
}

// TestPeers are a test's --peers-selector, --peers-namespace (default: the load balancer's),
// --peer-name and --peers-port (default 10000).
type TestPeers struct {
	Selector  string `json:"selector,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Local     string `json:"local"`
	Port      int    `json:"port,omitempty"`
}

// options are p as the snapshot takes them; namespace is the load balancer's.
func (p *TestPeers) options(namespace string) (snapshot.PeersOptions, error) {
	o := snapshot.PeersOptions{Enabled: true, Namespace: p.Namespace, Local: p.Local, Port: p.Port}
	if o.Namespace == "" {
		o.Namespace = namespace
	}
	if p.Selector != "" {
		sel, err := labels.Parse(p.Selector)
		if err != nil {
			return o, fmt.Errorf("peers: selector: %w", err)
		}
		o.Selector = sel
	}
	return o, nil
}

// MapEntry is an entry a map file must have.
type MapEntry struct {
	File  string `json:"file"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TestResult is a test's outcome (Err nil: it passed).
type TestResult struct {
	Name string
	Err  error
	// NotChecked is set when the test asks for `valid: true` and validation is off
	// (--validate=false): that assertion was not checked, and is never reported as passed.
	NotChecked bool
}

// testsOf reads the tests of a template set, in key order; a test that does not parse is an
// *snapshot.InputError on its key (ref gives the Ref of a key), with the line when known.
func testsOf(templates map[string]string, ref func(key string) snapshot.Ref) ([]Test, error) {
	var out []Test
	for _, key := range slices.Sorted(maps.Keys(templates)) {
		if !render.IsTest(key) {
			continue
		}
		fail := func(line int, err error) error {
			return &snapshot.InputError{Stage: snapshot.StageTest, Ref: ref(key), Line: line, Err: err}
		}
		t := Test{Key: key, Name: strings.TrimSuffix(strings.TrimPrefix(key, render.TestPrefix), render.TestSuffix)}
		j, err := yaml.YAMLToJSON([]byte(templates[key]))
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
			line := 0
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				line, _ = strconv.Atoi(m[1])
			}
			return nil, fail(line, errors.New(msg))
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fail(0, err)
		}
		if len(t.Expect) == 0 {
			return nil, fail(0, errors.New("a test expects nothing (expect: contains, notContains, matches, map, valid, deterministic)"))
		}
		t.objectsLine, t.expectLines = testLines(templates[key])
		out = append(out, t)
	}
	return out, nil
}

// yamlLine finds the line in the YAML parser's messages ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`line (\d+): `)

// testLines are the lines of a test's objects and of each of its assertions.
func testLines(text string) (objects int, expect []int) {
	var doc yamlv3.Node
	if yamlv3.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yamlv3.MappingNode {
		return 0, nil
	}
	top := doc.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		switch v := top[i+1]; top[i].Value {
		case "objects":
			objects = top[i].Line
		case "expect":
			for _, e := range v.Content {
				expect = append(expect, e.Line)
			}
		}
	}
	return objects, expect
}

// line is where the part of t that err (from runTest) is about is written in its key.
func (t Test) line(err error) int {
	var at *testPart
	if !errors.As(err, &at) {
		return 0
	}
	if at.expect < 0 {
		return t.objectsLine
	}
	if at.expect < len(t.expectLines) {
		return t.expectLines[at.expect]
	}
	return 0
}

// testPart is a failure of a test's objects (expect -1) or of one of its assertions.
type testPart struct {
	expect int
	err    error
}

func (e *testPart) Error() string {
	if e.expect < 0 {
		return "objects: " + e.err.Error()
	}
	return fmt.Sprintf("expect[%d]: %v", e.expect, e.err)
}

func (e *testPart) Unwrap() error { return e.err }

// templatesOf is the template set among chosen inputs (nil when there is none).
func templatesOf(chosen []snapshot.Input) *snapshot.Input {
	for i := range chosen {
		if chosen[i].Kind == snapshot.KindTemplates {
			return &chosen[i]
		}
	}
	return nil
}

// runTests runs the tests of the template set chosen has, each on objs with the test's objects
// in place: every outcome, and an *snapshot.InputError (stage test, on the test's key) for the
// first that fails.
func (b *Builder) runTests(ctx context.Context, objs *snapshot.Objects, chosen []snapshot.Input) ([]TestResult, error) {
	tmpl := templatesOf(chosen)
	if tmpl == nil {
		return nil, nil
	}
	ref := func(key string) snapshot.Ref { r := tmpl.Ref; r.Key = key; return r }
	tests, err := testsOf(tmpl.Data, ref)
	if err != nil {
		return nil, err
	}
	var results []TestResult
	var first error
	for _, t := range tests {
		notChecked, err := b.runTest(ctx, objs, tmpl, t)
		if ctx.Err() != nil {
			return results, &failure.Error{Stage: failure.Validate, Err: ctx.Err()}
		}
		var f *failure.Error
		if errors.As(err, &f) {
			return results, err
		}
		results = append(results, TestResult{Name: t.Name, Err: err, NotChecked: notChecked})
		if err != nil && first == nil {
			first = &snapshot.InputError{Stage: snapshot.StageTest, Ref: ref(t.Key), Line: t.line(err), Err: fmt.Errorf("test %s: %w", t.Name, err)}
		}
	}
	return results, first
}

// runTest renders objs with the test's objects in place, with the template set under test,
// and checks what it expects; notChecked says an assertion could not be checked
// (errNotValidated) and was skipped.
func (b *Builder) runTest(ctx context.Context, objs *snapshot.Objects, tmpl *snapshot.Input, t Test) (notChecked bool, err error) {
	if len(t.Objects) > 0 {
		if b.cfg.Manifests == nil {
			return false, &testPart{expect: -1, err: errors.New("they cannot be read here")}
		}
		list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": t.Objects})
		if err != nil {
			return false, &testPart{expect: -1, err: err}
		}
		over, err := b.cfg.Manifests(t.Key+".json", list)
		if err != nil {
			return false, &testPart{expect: -1, err: err}
		}
		over.Origins = nil // where in a JSON made here: nowhere an operator wrote
		objs = objs.Overlay(over)
	}
	if len(t.Clusters) > 0 {
		if objs, err = b.clusterObjects(objs, t); err != nil {
			return false, &testPart{expect: -1, err: err}
		}
	}
	in := b.cfg.Inputs.Decode(objs)
	var chosen []snapshot.Input
	for _, x := range in.List {
		switch {
		case x.Kind == snapshot.KindTemplates:
			chosen = append(chosen, *tmpl) // the set under test, whatever objs hold
		case x.Err != nil:
			return false, &testPart{expect: -1, err: x.Err}
		default:
			chosen = append(chosen, x)
		}
	}
	snap, err := b.cfg.Inputs.Assemble(objs, chosen)
	if err != nil {
		return false, err
	}
	if t.Peers != nil {
		opts, err := t.Peers.options(snap.ServicesRef.Namespace)
		if err != nil {
			return false, &testPart{expect: -1, err: err}
		}
		withPeers := *snap
		withPeers.Peers = snapshot.BuildPeers(objs, opts)
		snap = &withPeers
	}
	bundle, err := b.renderTest(ctx, snap)
	if err != nil {
		return false, err
	}
	for i, e := range t.Expect {
		switch err := b.check(ctx, e, bundle, snap); {
		case err == errNotValidated:
			notChecked = true
		case err != nil:
			return notChecked, &testPart{expect: i, err: err}
		}
	}
	return notChecked, nil
}

// apartRenderer renders beside the syncs' renders (render.Renderer.RenderApart): it takes
// what they kept for the next sync (each route's part, say) and leaves it as it was.
type apartRenderer interface {
	RenderApart(ctx context.Context, s *snapshot.Snapshot) (*render.Bundle, error)
}

// renderTest renders a test's snapshot: apart from the syncs' renders when the renderer can,
// so that a test reuses what the configuration's render computed (a route's part whose reads
// are the same: the same output, as its reads are all it depends on) and leaves the next sync
// the configuration's.
func (b *Builder) renderTest(ctx context.Context, snap *snapshot.Snapshot) (*render.Bundle, error) {
	if r, ok := b.cfg.Renderer.(apartRenderer); ok {
		return r.RenderApart(ctx, snap)
	}
	return b.cfg.Renderer.Render(ctx, snap)
}

// check checks one assertion on a rendering.
func (b *Builder) check(ctx context.Context, e Expect, bundle *render.Bundle, snap *snapshot.Snapshot) error {
	name := e.File
	if name == "" {
		name = "haproxy.cfg"
	}
	text, err := fileOf(bundle, name)
	if err != nil {
		return err
	}
	switch {
	case e.Contains != "" && !strings.Contains(text, e.Contains):
		return fmt.Errorf("%s does not contain %q", name, e.Contains)
	case e.NotContains != "" && strings.Contains(text, e.NotContains):
		return fmt.Errorf("%s contains %q", name, e.NotContains)
	case e.Matches != "":
		re, err := regexp.Compile(`(?m)` + e.Matches)
		if err != nil {
			return fmt.Errorf("matches: %w", err)
		}
		if !re.MatchString(text) {
			return fmt.Errorf("%s does not match %q", name, e.Matches)
		}
	case e.Map != nil:
		m, err := fileOf(bundle, "maps/"+e.Map.File)
		if err != nil {
			return err
		}
		if got, line, ok := mapEntry(m, e.Map.Key); !ok || got != e.Map.Value {
			shown := strconv.Quote(got)
			if bundle.Secret.Holds("maps/"+e.Map.File, line) {
				shown = content.Withheld
			}
			return fmt.Errorf("map %s: %q is %s (found: %v), want %q", e.Map.File, e.Map.Key, shown, ok, e.Map.Value)
		}
	case e.Valid:
		if err := b.checkValid(ctx, bundle, snap); err != nil {
			return err
		}
	case e.Deterministic:
		again, err := b.renderTest(ctx, snap)
		if err != nil {
			return err
		}
		if again.Hash != bundle.Hash {
			return errors.New("rendered twice, it differs (a dict iterated in no fixed order?)")
		}
	}
	return nil
}

// stageAndCheck stages the rendering, runs haproxy -c on it and discards it.
func (b *Builder) stageAndCheck(ctx context.Context, bundle *render.Bundle) error {
	b.cfg.Exclusive.Lock()
	defer b.cfg.Exclusive.Unlock()
	gen, err := b.cfg.Store.StageContent(bundle.Content(), bundle.Hash)
	if err != nil {
		return &failure.Error{Stage: failure.Staging, Err: err}
	}
	defer func() { _ = b.cfg.Store.Discard(gen) }()
	return b.Check(ctx, gen)
}

// errNotValidated is what `valid: true` gives when nothing can check it: the assertion is
// skipped and the result says so (TestResult.NotChecked).
var errNotValidated = errors.New("valid: true not checked: validation is off (--validate=false)")

// checkValid runs haproxy -c on the rendering, staged and then discarded.
func (b *Builder) checkValid(ctx context.Context, bundle *render.Bundle, snap *snapshot.Snapshot) error {
	if b.cfg.Checker == nil {
		return errNotValidated
	}
	err := b.stageAndCheck(ctx, bundle)
	var ie *snapshot.InputError
	if errors.As(err, &ie) {
		return ie.Err
	}
	return err
}

// fileOf is a file of the rendering: haproxy.cfg, maps/NAME or files/NAME.
func fileOf(b *render.Bundle, name string) (string, error) {
	if name == "haproxy.cfg" {
		return string(b.Config), nil
	}
	if n, ok := strings.CutPrefix(name, "maps/"); ok {
		if data, ok := b.Maps[n]; ok {
			return string(data), nil
		}
	}
	if n, ok := strings.CutPrefix(name, "files/"); ok {
		if data, ok := b.Files[n]; ok {
			return string(data), nil
		}
	}
	return "", fmt.Errorf("the rendering has no file %s (haproxy.cfg, maps/NAME, files/NAME)", name)
}

// mapEntry finds key in a map file ("key value" lines; # starts a comment): its value and
// its line (1-based).
func mapEntry(text, key string) (string, int, bool) {
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		if k == key {
			return strings.TrimSpace(v), i + 1, true
		}
	}
	return "", 0, false
}

// clusterObjects adds to objs the pods and watched objects of t's clusters, each carrying its
// cluster's name.
func (b *Builder) clusterObjects(objs *snapshot.Objects, t Test) (*snapshot.Objects, error) {
	if b.cfg.Manifests == nil {
		return nil, errors.New("they cannot be read here")
	}
	c := *objs
	c.Resources = maps.Clone(objs.Resources)
	var pods snapshot.PodConverter
	var conv snapshot.ObjectConverter
	for _, name := range slices.Sorted(maps.Keys(t.Clusters)) {
		if err := snapshot.CheckClusterName(name); err != nil {
			return nil, fmt.Errorf("clusters: %w", err)
		}
		list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": t.Clusters[name]})
		if err != nil {
			return nil, err
		}
		over, err := b.cfg.Manifests(t.Key+"."+name+".json", list)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		if len(over.ConfigMaps)+len(over.Secrets)+len(over.ConvertedPods) > 0 {
			return nil, fmt.Errorf("cluster %s: pods, EndpointSlices and watched objects only (the load balancer's ConfigMaps and Secrets are in objects)", name)
		}
		if len(over.EndpointSlices) > 0 {
			c.ClusterEndpointSlices = maps.Clone(c.ClusterEndpointSlices)
			if c.ClusterEndpointSlices == nil {
				c.ClusterEndpointSlices = map[string][]*discoveryv1.EndpointSlice{}
			}
			c.ClusterEndpointSlices[name] = append(slices.Clip(c.ClusterEndpointSlices[name]), over.EndpointSlices...)
		}
		for _, p := range over.Pods {
			c.ConvertedPods = append(slices.Clip(c.ConvertedPods), pods.ConvertIn(p, name))
		}
		for res, list := range over.Resources {
			if c.Resources == nil {
				c.Resources = map[string][]*snapshot.Object{}
			}
			for _, o := range list {
				c.Resources[res] = append(slices.Clip(c.Resources[res]), conv.InCluster(o, name))
			}
		}
	}
	return &c, nil
}
