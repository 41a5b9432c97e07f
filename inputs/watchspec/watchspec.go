// Package watchspec is the --watch option: which Kubernetes resources the templates see as
// resources.<name>, restricted to a namespace and a label selector, and indexed by the labels or
// fields the operator names.
//
// One --watch value is a resource in kubectl's fully qualified form, then options separated by
// semicolons:
//
//	RESOURCE[;namespace=NS][;selector=SELECTOR][;index=[NAME=]label:KEY|field:PATH]...[;kind=KIND][;as=NAME][;status=off|FIELD,...]
//
//	ingresses.v1.networking.k8s.io
//	endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name
//	nodes.v1
//	httproutes.v1.gateway.networking.k8s.io;namespace=web;selector=team=a,tier!=db
//
// RESOURCE is PLURAL.VERSION.GROUP (PLURAL.VERSION for the core group, which kubectl writes
// PLURAL.VERSION.; both are taken), as `kubectl get ingresses.v1.networking.k8s.io` takes it.
package watchspec

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Resource is one --watch value.
type Resource struct {
	// Resource, Version and Group name the resource: ingresses, v1, networking.k8s.io ("" for
	// the core group).
	Resource, Version, Group string
	// Namespace restricts the watch to one namespace; "" watches every namespace (and is the
	// only choice for a cluster-scoped resource).
	Namespace string
	// Selector restricts the watch to the objects whose labels it matches, as written
	// (Labels is the parsed form); "" selects every object.
	Selector string
	Labels   labels.Selector
	// Indexes are the lookups templates get beside by_name, in the order given.
	Indexes []Index
	// Kind is the kind of the resource's objects when the operator gives it (;kind=): the file
	// source needs it for a custom resource whose kind it cannot derive from the plural.
	Kind string
	// As is the name in the template context when the operator gives one (;as=); see Name.
	As string
	// Status is what of the objects' status templates see (;status=): all of it, none, or
	// some of its fields, so that a change of the rest (the sidecar's own status writes,
	// above all) renders nothing.
	Status Status
}

// Status is what of a watched resource's objects' status templates see.
type Status struct {
	// Off (;status=off): none of it.
	Off bool
	// Fields (;status=addresses,conditions): only these fields of it; none named: all of it.
	Fields []string
}

// All says templates see the whole status (the default).
func (s Status) All() bool { return !s.Off && len(s.Fields) == 0 }

// String is the option's value: on, off or the fields.
func (s Status) String() string {
	switch {
	case s.Off:
		return "off"
	case len(s.Fields) == 0:
		return "on"
	}
	return strings.Join(s.Fields, ",")
}

// Keeps says templates see the status field name.
func (s Status) Keeps(name string) bool {
	return !s.Off && (len(s.Fields) == 0 || slices.Contains(s.Fields, name))
}

// Union is what two watched resources that take the same objects see together.
func (s Status) Union(t Status) Status {
	switch {
	case s.Off:
		return t
	case t.Off:
		return s
	case s.All() || t.All():
		return Status{}
	}
	u := slices.Clone(s.Fields)
	for _, f := range t.Fields {
		if !slices.Contains(u, f) {
			u = append(u, f)
		}
	}
	return Status{Fields: u}
}

// Trim leaves in obj (an object as JSON decodes it) the status templates see.
func (s Status) Trim(obj map[string]any) {
	if s.All() {
		return
	}
	st, ok := obj["status"].(map[string]any)
	if !ok || s.Off {
		delete(obj, "status")
		return
	}
	kept := make(map[string]any, len(s.Fields))
	for _, f := range s.Fields {
		if v, ok := st[f]; ok {
			kept[f] = v
		}
	}
	if len(kept) == 0 {
		delete(obj, "status")
		return
	}
	obj["status"] = kept
}

// Index is a lookup of a watched resource's objects by the value of a label or of a field.
type Index struct {
	// Name is the lookup's name: templates read it as resources.<resource>.by_<Name>.
	Name string
	// Label is the label key whose value indexes an object; or
	Label string
	// Field is the path of the field (map keys from the object's top; a list on the way is
	// walked, each element indexing the object) whose value indexes it.
	Field []string
}

// Spec is how the index is written: label:KEY or field:PATH.
func (ix Index) Spec() string {
	if ix.Label != "" {
		return "label:" + ix.Label
	}
	return "field:" + strings.Join(ix.Field, ".")
}

// Name is the resource's name in the template context, resources.<Name>: As when given, else
// the plural.
func (r Resource) Name() string {
	if r.As != "" {
		return r.As
	}
	return r.Resource
}

// GVR is the resource's group, version and plural.
func (r Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// GroupVersion is the apiVersion of the resource's objects: networking.k8s.io/v1, v1.
func (r Resource) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// Qualified is the resource in kubectl's fully qualified form: ingresses.v1.networking.k8s.io,
// nodes.v1.
func (r Resource) Qualified() string {
	s := r.Resource + "." + r.Version
	if r.Group != "" {
		s += "." + r.Group
	}
	return s
}

// String is the --watch value that gives r.
func (r Resource) String() string {
	parts := []string{r.Qualified()}
	if r.Namespace != "" {
		parts = append(parts, "namespace="+r.Namespace)
	}
	if r.Selector != "" {
		parts = append(parts, "selector="+r.Selector)
	}
	for _, ix := range r.Indexes {
		parts = append(parts, "index="+ix.Name+"="+ix.Spec())
	}
	if r.Kind != "" {
		parts = append(parts, "kind="+r.Kind)
	}
	if r.As != "" {
		parts = append(parts, "as="+r.As)
	}
	if !r.Status.All() {
		parts = append(parts, "status="+r.Status.String())
	}
	return strings.Join(parts, ";")
}

var (
	// versionRE is a Kubernetes API version: v1, v2beta1, v1alpha3.
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	// identRE is a name templates can write after a dot.
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// kindRE is a Kubernetes kind.
	kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	// fieldRE is one key of a field path.
	fieldRE = regexp.MustCompile(`^[A-Za-z0-9_$@-]+$`)
	// switchWords are not taken for status fields.
	switchWords = map[string]bool{"yes": true, "no": true, "true": true, "false": true, "none": true, "all": true,
		"enabled": true, "disabled": true, "enable": true, "disable": true, "0": true, "1": true}
	// startRE is the start of a --watch value: PLURAL.VERSION[.GROUP] then the end or ";".
	startRE = regexp.MustCompile(`^\s*[a-z0-9]([-a-z0-9]*[a-z0-9])?\.v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?(\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?\.?\s*(;|$)`)
)

// Parse reads one --watch value.
func Parse(s string) (Resource, error) {
	var r Resource
	parts := strings.Split(strings.TrimSpace(s), ";")
	if err := r.parseResource(strings.TrimSpace(parts[0])); err != nil {
		return Resource{}, fmt.Errorf("--watch %q: %w", s, err)
	}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		key, val, ok := strings.Cut(p, "=")
		key = strings.TrimSpace(key)
		if !ok {
			return Resource{}, fmt.Errorf("--watch %q: option %q: want KEY=VALUE (namespace, selector, index, kind or as)", s, p)
		}
		if seen[key] && key != "index" {
			return Resource{}, fmt.Errorf("--watch %q: %s is given twice", s, key)
		}
		seen[key] = true
		if err := r.option(key, strings.TrimSpace(val)); err != nil {
			return Resource{}, fmt.Errorf("--watch %q: %w", s, err)
		}
	}
	names := map[string]bool{}
	for _, ix := range r.Indexes {
		if names[ix.Name] {
			return Resource{}, fmt.Errorf("--watch %q: two indexes are named %q (name one: index=NAME=%s)", s, ix.Name, ix.Spec())
		}
		names[ix.Name] = true
	}
	return r, nil
}

// parseResource reads PLURAL.VERSION[.GROUP].
func (r *Resource) parseResource(s string) error {
	s = strings.TrimSuffix(s, ".") // kubectl's "pods.v1." names the core group too
	plural, rest, ok := strings.Cut(s, ".")
	if !ok || plural == "" {
		return fmt.Errorf("resource %q: want PLURAL.VERSION.GROUP as kubectl writes it (ingresses.v1.networking.k8s.io), or PLURAL.VERSION for the core group (nodes.v1)", s)
	}
	if errs := validation.IsDNS1123Label(plural); len(errs) > 0 {
		return fmt.Errorf("resource %q: %q is not a resource's plural name: %s", s, plural, strings.Join(errs, "; "))
	}
	version, group, _ := strings.Cut(rest, ".")
	if !versionRE.MatchString(version) {
		return fmt.Errorf("resource %q: %q is not an API version (v1, v1beta1, ...): want PLURAL.VERSION.GROUP (ingresses.v1.networking.k8s.io)", s, version)
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return fmt.Errorf("resource %q: %q is not an API group: %s", s, group, strings.Join(errs, "; "))
		}
	}
	r.Resource, r.Version, r.Group = plural, version, group
	return nil
}

func (r *Resource) option(key, val string) error {
	if val == "" {
		return fmt.Errorf("%s= needs a value", key)
	}
	switch key {
	case "namespace":
		if errs := validation.IsDNS1123Label(val); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", val, strings.Join(errs, "; "))
		}
		r.Namespace = val
	case "selector":
		sel, err := labels.Parse(val)
		if err != nil {
			return fmt.Errorf("selector %q: %w", val, err)
		}
		r.Selector, r.Labels = val, sel
	case "index":
		ix, err := parseIndex(val)
		if err != nil {
			return err
		}
		r.Indexes = append(r.Indexes, ix)
	case "kind":
		if !kindRE.MatchString(val) {
			return fmt.Errorf("kind %q: want a kind as objects write it (HTTPRoute, CronTab)", val)
		}
		r.Kind = val
	case "as":
		if !identRE.MatchString(val) {
			return fmt.Errorf("as %q: want a name templates can write after a dot (letters, digits, _)", val)
		}
		r.As = val
	case "status":
		switch val {
		case "off":
			r.Status = Status{Off: true}
		case "on":
			r.Status = Status{}
		default:
			for _, f := range strings.Split(val, ",") {
				f = strings.TrimSpace(f)
				// A switch's word is a mistyped on or off, not a status field (camelCase by the
				// API conventions): a field list would hide the status silently.
				if !identRE.MatchString(f) || switchWords[strings.ToLower(f)] {
					return fmt.Errorf("status %q: want on (templates see the objects' status, the default), off, or the status fields they see (status=addresses,conditions)", val)
				}
				if !slices.Contains(r.Status.Fields, f) {
					r.Status.Fields = append(r.Status.Fields, f)
				}
			}
		}
	default:
		return fmt.Errorf("unknown option %q (want namespace, selector, index, kind, as or status)", key)
	}
	return nil
}

// parseIndex reads [NAME=]label:KEY or [NAME=]field:PATH.
func parseIndex(val string) (Index, error) {
	var ix Index
	spec := val
	if name, rest, ok := strings.Cut(val, "="); ok && !strings.Contains(name, ":") {
		ix.Name, spec = strings.TrimSpace(name), strings.TrimSpace(rest)
		if !identRE.MatchString(ix.Name) {
			return Index{}, fmt.Errorf("index %q: name %q: want letters, digits and _ (templates read it as by_NAME)", val, ix.Name)
		}
	}
	how, what, ok := strings.Cut(spec, ":")
	switch {
	case !ok:
		return Index{}, fmt.Errorf("index %q: want [NAME=]label:KEY or [NAME=]field:PATH", val)
	case how == "label":
		if errs := validation.IsQualifiedName(what); len(errs) > 0 {
			return Index{}, fmt.Errorf("index %q: label key %q: %s", val, what, strings.Join(errs, "; "))
		}
		ix.Label = what
	case how == "field":
		path := strings.Split(what, ".")
		for _, p := range path {
			if !fieldRE.MatchString(p) {
				return Index{}, fmt.Errorf("index %q: field path %q: want keys separated by dots (spec.nodeName, endpoints.nodeName)", val, what)
			}
		}
		ix.Field = path
	default:
		return Index{}, fmt.Errorf("index %q: %q: want label:KEY or field:PATH", val, how)
	}
	if ix.Name == "" {
		ix.Name = derivedName(ix)
	}
	if ix.Name == "name" {
		return Index{}, fmt.Errorf("index %q: the name \"name\" is by_name's, which every resource has: name the index (index=NAME=%s)", val, ix.Spec())
	}
	return ix, nil
}

// derivedName names an index the operator did not name: the last part of the label key
// (kubernetes.io/service-name: service_name) or of the field path (spec.nodeName: nodeName),
// with the characters templates cannot write after a dot made "_".
func derivedName(ix Index) string {
	last := ix.Label
	if last != "" {
		if i := strings.LastIndexByte(last, '/'); i >= 0 {
			last = last[i+1:]
		}
	} else {
		last = ix.Field[len(ix.Field)-1]
	}
	b := []byte(last)
	for i, c := range b {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}

// List is the repeatable --watch flag (a flag.Value): every value adds resources. A value may
// hold several resources separated by commas, as the environment twin does
// (WATCH=ingresses.v1.networking.k8s.io,nodes.v1): a comma starts a new resource only when
// what follows it starts like one (PLURAL.VERSION...), so a selector's commas stay with it.
type List []Resource

// String is the values, comma-separated.
func (l *List) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, r := range *l {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Set parses s and adds its resources; a name taken twice in the template context is an error.
func (l *List) Set(s string) error {
	next := append(List(nil), *l...)
	for _, v := range Split(s) {
		r, err := Parse(v)
		if err != nil {
			return err
		}
		next = append(next, r)
	}
	if err := next.Validate(); err != nil {
		return err
	}
	*l = next
	return nil
}

// Split cuts a comma-separated list of --watch values where a new resource starts (see List).
func Split(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if len(out) > 0 && !startRE.MatchString(part) {
			out[len(out)-1] += "," + part
			continue
		}
		if strings.TrimSpace(part) != "" || len(out) > 0 {
			out = append(out, part)
		}
	}
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// Validate checks that every resource has a name of its own in the template context.
func (l List) Validate() error {
	byName := map[string]Resource{}
	var errs []error
	for _, r := range l {
		if prev, ok := byName[r.Name()]; ok {
			errs = append(errs, fmt.Errorf("--watch %s and %s are both resources.%s in the templates: give one another name with ;as=NAME",
				prev.Qualified(), r.Qualified(), r.Name()))
			continue
		}
		byName[r.Name()] = r
	}
	return errors.Join(errs...)
}

// Names are the context names of the resources, in the order given.
func (l List) Names() []string {
	out := make([]string, len(l))
	for i, r := range l {
		out[i] = r.Name()
	}
	return out
}

// wellKnown are the resources templates watch most, by plural, in kubectl's fully qualified
// form: what Suggest names for them.
var wellKnown = map[string]string{
	"configmaps": "configmaps.v1", "endpoints": "endpoints.v1", "namespaces": "namespaces.v1", "nodes": "nodes.v1",
	"pods": "pods.v1", "secrets": "secrets.v1", "services": "services.v1",
	"endpointslices": "endpointslices.v1.discovery.k8s.io",
	"ingresses":      "ingresses.v1.networking.k8s.io", "ingressclasses": "ingressclasses.v1.networking.k8s.io",
	"gateways": "gateways.v1.gateway.networking.k8s.io", "gatewayclasses": "gatewayclasses.v1.gateway.networking.k8s.io",
	"httproutes": "httproutes.v1.gateway.networking.k8s.io", "grpcroutes": "grpcroutes.v1.gateway.networking.k8s.io",
}

// Suggest is the --watch value that gives templates resources.<name>: the well-known
// resource of that plural, else PLURAL.VERSION.GROUP to fill in.
func Suggest(name string) string {
	if q, ok := wellKnown[name]; ok {
		return q
	}
	return name + ".VERSION.GROUP"
}
