package objstatus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Prefix starts a declaration: a comment line of haproxy.cfg (white space before the # is
// allowed).
const Prefix = "haproxy-sidecar:"

// The kinds a rendering may declare it serves.
const (
	KindIngress      = "Ingress"
	KindGatewayClass = "GatewayClass"
	KindGateway      = "Gateway"
	KindHTTPRoute    = "HTTPRoute"
)

// DefaultWarningReason is the reason of the Warning Event of a declaration's warning= that
// gives no warning.reason=.
const DefaultWarningReason = "ConfigurationWarning"

// Condition types.
const (
	Accepted         = "Accepted"
	Programmed       = "Programmed"
	ResolvedRefs     = "ResolvedRefs"
	Conflicted       = "Conflicted"
	SupportedVersion = "SupportedVersion"
)

// Object names one Kubernetes object (Namespace "": a cluster-scoped one, a GatewayClass).
type Object struct {
	Kind, Namespace, Name string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// RouteKind is one kind of route a Gateway listener supports (its supportedKinds).
type RouteKind struct {
	Group, Kind string
}

// Parent is the Gateway a route declaration is about, as the route's parentRef names it.
type Parent struct {
	Namespace, Name string
	// Section is the parentRef's sectionName ("": none), Port its port (0: none).
	Section string
	Port    int32
}

func (p Parent) String() string {
	s := p.Namespace + "/" + p.Name
	if p.Section != "" {
		s += " section " + p.Section
	}
	if p.Port != 0 {
		s += " port " + strconv.Itoa(int(p.Port))
	}
	return s
}

// Condition is one condition a declaration sets.
type Condition struct {
	Type string
	True bool
	// Reason and Message: the declared ones, else the defaults (a true condition's reason is
	// its type).
	Reason, Message string
}

// Declaration is one line "# haproxy-sidecar: serves KIND NAMESPACE/NAME [ATTRIBUTE...]"
// (KIND NAME for a GatewayClass).
type Declaration struct {
	// Line is the line's number in haproxy.cfg (from 1).
	Line int
	Object
	// Generation is the metadata.generation of the object the rendering was made from (0: not
	// declared): the conditions' observedGeneration.
	Generation int64
	// Parent is an HTTPRoute declaration's parent.
	Parent Parent
	// Listener is the listener a Gateway declaration is about ("": the Gateway itself), with
	// the number of routes attached to it and the route kinds it supports.
	Listener string
	Attached int32
	Kinds    []RouteKind
	// Addresses are where a Gateway is served (addresses=): its status.addresses, in place of
	// the published ones.
	Addresses []Address
	// Conditions are, in this order: a GatewayClass's (Accepted, SupportedVersion), a
	// Gateway's (Accepted, Programmed), a Gateway listener's (Accepted, Programmed,
	// ResolvedRefs, Conflicted) or a route parent's (Accepted, ResolvedRefs); none for an
	// Ingress.
	Conditions []Condition
	// Warning is what an Ingress declaration warns of (warning=, "": nothing): what of the
	// object the rendering does not serve as written (an annotation it does not support),
	// recorded as a Warning Event on the object with WarningReason.
	Warning, WarningReason string
}

// conditionWord is the attribute naming a condition; def is the condition's status when the
// declaration does not say (a condition false by default, Conflicted, has its reason).
type conditionWord struct {
	word, typ string
	def       bool
}

// listenerKind is the key of conditionWords for a Gateway's listener declarations.
const listenerKind = "Gateway listener"

// conditionWords are the attribute naming each condition, by kind, in the conditions' order.
var conditionWords = map[string][]conditionWord{
	KindIngress:      nil,
	KindGatewayClass: {{"accepted", Accepted, true}, {"supported", SupportedVersion, true}},
	KindGateway:      {{"accepted", Accepted, true}, {"programmed", Programmed, true}},
	listenerKind:     {{"accepted", Accepted, true}, {"programmed", Programmed, true}, {"resolved", ResolvedRefs, true}, {"conflicted", Conflicted, false}},
	KindHTTPRoute:    {{"accepted", Accepted, true}, {"resolved", ResolvedRefs, true}},
}

// defaultMessages are the messages of conditions in their default status that declare none.
var defaultMessages = map[string]string{
	Accepted:         "Accepted by HAProxy",
	Programmed:       "HAProxy runs a configuration that serves it",
	ResolvedRefs:     "All references resolved",
	Conflicted:       "No conflicts",
	SupportedVersion: "The Gateway API version is supported",
}

// defaultFalseReasons are the reasons of conditions false by default that declare none.
var defaultFalseReasons = map[string]string{Conflicted: "NoConflicts"}

// reasonPattern is metav1.Condition's reason.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// nameWord is a Kubernetes namespace or name (RFC 1123 subdomain, at most 253).
var nameWord = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// maxMessage bounds a condition's message (the Gateway API's maxLength).
const maxMessage = 32768

// Parse reads the declarations of a rendered haproxy.cfg. A declaration it cannot read is left
// out, with a problem naming its line (for the log); the others stand. It is the Writer's
// read (declCache) of a first rendering.
func Parse(cfg []byte) (decls []Declaration, problems []error) {
	var c declCache
	return c.parse(cfg)
}

// declarationLines calls fn with the number (from 1) and the text of each declaration line of
// cfg, in order: the line from its #, without the white space before it nor the \r ending it
// (lines as bufio.ScanLines splits them). Only the lines holding Prefix are looked at: the
// others are skipped by bytes.Index, not read line by line.
func declarationLines(cfg []byte, fn func(n int, line []byte)) {
	prefix := []byte(Prefix)
	n, counted := 1, 0 // cfg[counted] starts line n
	for i := 0; ; {
		j := bytes.Index(cfg[i:], prefix)
		if j < 0 {
			return
		}
		j += i
		start := bytes.LastIndexByte(cfg[:j], '\n') + 1
		end := len(cfg)
		if k := bytes.IndexByte(cfg[j:], '\n'); k >= 0 {
			end = j + k
		}
		i = end
		line := cfg[start:end]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		b := bytes.TrimLeft(line, " \t")
		r, ok := bytes.CutPrefix(b, []byte("#"))
		if !ok || !bytes.HasPrefix(bytes.TrimLeft(r, " \t"), prefix) {
			continue
		}
		n += bytes.Count(cfg[counted:start], []byte("\n"))
		counted = start
		fn(n, b)
	}
}

// declarationText is what a declaration line (from its #) declares: what follows Prefix.
func declarationText(line string) string {
	rest, _ := strings.CutPrefix(line, "#")
	rest, _ = strings.CutPrefix(strings.TrimLeft(rest, " \t"), Prefix)
	return rest
}

// lineProblem is the problem of the declaration on line n that could not be read.
func lineProblem(n int, line string, err error) error {
	return fmt.Errorf("haproxy.cfg line %d: %q: %w", n, line, err)
}

// attr is one ATTRIBUTE: KEY or KEY=VALUE.
type attr struct {
	key, value string
	bare       bool // no =VALUE
}

func parseDeclaration(s string) (Declaration, error) {
	words, err := splitWords(s)
	if err != nil {
		return Declaration{}, err
	}
	d, err := parseServes(words)
	if err != nil {
		return Declaration{}, err
	}
	kind := d.conditionKind(words[3:])
	conds := map[string]*Condition{}
	for _, c := range conditionWords[kind] {
		conds[c.word] = &Condition{Type: c.typ, True: c.def}
	}
	why := falseWhy{stated: map[string]bool{}}
	seen := map[string]bool{}
	for _, a := range words[3:] {
		if seen[a.key] {
			return Declaration{}, fmt.Errorf("%s given twice", a.key)
		}
		seen[a.key] = true
		if err := d.set(a, conds, &why); err != nil {
			return Declaration{}, err
		}
	}
	if d.Warning != "" && d.WarningReason == "" {
		d.WarningReason = DefaultWarningReason
	}
	if d.Kind == KindHTTPRoute && d.Parent.Name == "" {
		return Declaration{}, fmt.Errorf("an %s declaration needs parent=NAMESPACE/NAME", d.Kind)
	}
	for _, cw := range conditionWords[kind] {
		c, err := why.complete(*conds[cw.word], cw)
		if err != nil {
			return Declaration{}, err
		}
		d.Conditions = append(d.Conditions, c)
	}
	return d, nil
}

// conditionKind is the key of conditionWords for d, given its attributes: a Gateway's
// listener= makes it a listener's declaration (and sets d.Listener, checked by set).
func (d *Declaration) conditionKind(attrs []attr) string {
	if d.Kind != KindGateway {
		return d.Kind
	}
	for _, a := range attrs {
		if a.key == "listener" && !a.bare {
			d.Listener = a.value
			return listenerKind
		}
	}
	return d.Kind
}

// parseServes reads the words every declaration starts with: serves KIND NAMESPACE/NAME (KIND
// NAME for a GatewayClass, which has no namespace).
func parseServes(words []attr) (Declaration, error) {
	if len(words) < 3 || !words[0].bare || words[0].key != "serves" {
		return Declaration{}, fmt.Errorf("want %s serves KIND NAMESPACE/NAME [ATTRIBUTE...]", Prefix)
	}
	kind := words[1].key
	if _, ok := conditionWords[kind]; !ok || !words[1].bare || kind == listenerKind {
		return Declaration{}, fmt.Errorf("kind %q: want %s, %s, %s or %s", words[1].key, KindIngress, KindGatewayClass, KindGateway, KindHTTPRoute)
	}
	if kind == KindGatewayClass {
		if !words[2].bare || len(words[2].key) > 253 || !nameWord.MatchString(words[2].key) {
			return Declaration{}, fmt.Errorf("%q: want the GatewayClass's NAME", words[2].key)
		}
		return Declaration{Object: Object{Kind: kind, Name: words[2].key}}, nil
	}
	ns, name, err := namespacedName(words[2])
	if err != nil {
		return Declaration{}, err
	}
	return Declaration{Object: Object{Kind: kind, Namespace: ns, Name: name}}, nil
}

// falseWhy are a declaration's reason= and message= (nil: not given): those of its conditions
// declared false (stated, by word) that say none of their own.
type falseWhy struct {
	reason, message *string
	stated          map[string]bool
}

// set takes one ATTRIBUTE of d: a condition's (in conds, by its word), the reason or message
// of the false ones (why), or one of d's own.
func (d *Declaration) set(a attr, conds map[string]*Condition, why *falseWhy) error {
	kind := d.Kind
	word, field, dotted := strings.Cut(a.key, ".")
	c := conds[word]
	listener := d.Listener != ""
	switch {
	case c != nil && !dotted:
		if a.bare {
			c.True = true
			break
		}
		v, err := strconv.ParseBool(a.value)
		if err != nil || a.value != "true" && a.value != "false" {
			return fmt.Errorf("%s=%s: want true or false", a.key, a.value)
		}
		c.True = v
		why.stated[word] = !v
	case c != nil && field == "reason" && !a.bare:
		c.Reason = a.value
	case c != nil && field == "message" && !a.bare:
		c.Message = a.value
	case a.key == "reason" && !a.bare && kind != KindIngress:
		why.reason = &a.value
	case a.key == "message" && !a.bare && kind != KindIngress:
		why.message = &a.value
	case a.key == "warning" && !a.bare && kind == KindIngress:
		d.Warning = a.value
		if len(d.Warning) > maxMessage {
			d.Warning = d.Warning[:maxMessage-3] + "..."
		}
	case a.key == "warning.reason" && !a.bare && kind == KindIngress:
		if len(a.value) > 128 || !reasonPattern.MatchString(a.value) {
			return fmt.Errorf("warning.reason=%s: want a CamelCase word", a.value)
		}
		d.WarningReason = a.value
	case a.key == "listener" && !a.bare && kind == KindGateway:
		if !nameWord.MatchString(a.value) || len(a.value) > 253 {
			return fmt.Errorf("listener=%s: want a listener name", a.value)
		}
	case a.key == "attached" && !a.bare && listener:
		n, err := strconv.ParseInt(a.value, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("attached=%s: want a number of routes", a.value)
		}
		d.Attached = int32(n)
	case a.key == "kinds" && !a.bare && listener:
		kinds, err := parseKinds(a.value)
		if err != nil {
			return err
		}
		d.Kinds = kinds
	case a.key == "addresses" && !a.bare && kind == KindGateway && !listener:
		for _, v := range strings.Split(a.value, ",") {
			if v == "" || len(v) > 253 {
				return fmt.Errorf("addresses=%s: want IPs or host names, comma-separated", a.value)
			}
		}
		d.Addresses = Addresses(strings.Split(a.value, ","))
	case a.key == "generation" && !a.bare && kind != KindIngress:
		g, err := strconv.ParseInt(a.value, 10, 64)
		if err != nil || g < 1 {
			return fmt.Errorf("generation=%s: want a positive number", a.value)
		}
		d.Generation = g
	case a.key == "parent" && !a.bare && kind == KindHTTPRoute:
		var err error
		if d.Parent.Namespace, d.Parent.Name, err = namespacedName(attr{key: a.value, bare: true}); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	case a.key == "section" && !a.bare && kind == KindHTTPRoute:
		if !nameWord.MatchString(a.value) || len(a.value) > 253 {
			return fmt.Errorf("section=%s: want a listener name", a.value)
		}
		d.Parent.Section = a.value
	case a.key == "port" && !a.bare && kind == KindHTTPRoute:
		p, err := strconv.Atoi(a.value)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("port=%s: want 1 to 65535", a.value)
		}
		d.Parent.Port = int32(p)
	default:
		return fmt.Errorf("%s: not an attribute of %s (%s)", a.key, kind, attributesOf(kind))
	}
	return nil
}

// complete gives c (named cw.word in the declaration) what it was not given: one declared
// false that is true by default the declaration's reason and message, one false by default
// its default reason, a true one the defaults; and checks its reason and bounds its message.
func (why falseWhy) complete(c Condition, cw conditionWord) (Condition, error) {
	word := cw.word
	if why.stated[word] && cw.def && c.Reason == "" && why.reason != nil {
		c.Reason = *why.reason
	}
	if why.stated[word] && cw.def && c.Message == "" && why.message != nil {
		c.Message = *why.message
	}
	byDefault := !c.True && !cw.def && c.Reason == ""
	switch {
	case c.Reason == "" && c.True:
		c.Reason = c.Type
	case c.Reason == "" && byDefault:
		c.Reason = defaultFalseReasons[c.Type]
	case c.Reason == "":
		return Condition{}, fmt.Errorf("%s=false needs its reason (reason= or %s.reason=)", word, word)
	case len(c.Reason) > 1024 || !reasonPattern.MatchString(c.Reason):
		return Condition{}, fmt.Errorf("reason %q of %s: want a CamelCase word (letters, digits, _ , :)", c.Reason, c.Type)
	}
	if c.Message == "" && c.True == cw.def {
		c.Message = defaultMessages[c.Type]
	}
	if len(c.Message) > maxMessage {
		c.Message = c.Message[:maxMessage-3] + "..."
	}
	return c, nil
}

// attributesOf lists the attributes a kind takes, for errors.
func attributesOf(kind string) string {
	var out []string
	for _, c := range conditionWords[kind] {
		out = append(out, c.word+"[=true|false]", c.word+".reason=", c.word+".message=")
	}
	switch kind {
	case KindIngress:
		return "warning=, warning.reason="
	case KindHTTPRoute:
		out = append(out, "parent=", "section=", "port=")
	case KindGateway:
		out = append(out, "addresses=", "listener= (then "+attributesOf(listenerKind)+")")
	case listenerKind:
		return strings.Join(append(out, "attached=", "kinds=", "generation=", "reason=", "message="), ", ")
	}
	return strings.Join(append(out, "generation=", "reason=", "message="), ", ")
}

// parseKinds reads kinds=: KIND or GROUP/KIND, comma-separated (the group defaults to the
// Gateway API's); "" is none.
func parseKinds(s string) ([]RouteKind, error) {
	out := []RouteKind{}
	if s == "" {
		return out, nil
	}
	for _, k := range strings.Split(s, ",") {
		group, kind, ok := strings.Cut(k, "/")
		if !ok {
			group, kind = gatewayGroup, k
		}
		if !kindWord.MatchString(kind) || group != "" && !nameWord.MatchString(group) {
			return nil, fmt.Errorf("kinds=%s: want KIND or GROUP/KIND, comma-separated", s)
		}
		out = append(out, RouteKind{Group: group, Kind: kind})
	}
	return out, nil
}

// kindWord is a Kubernetes kind.
var kindWord = regexp.MustCompile(`^[a-zA-Z]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?$`)

func namespacedName(a attr) (ns, name string, err error) {
	ns, name, ok := strings.Cut(a.key, "/")
	if !a.bare || !ok || len(ns) > 63 || len(name) > 253 || !nameWord.MatchString(ns) || !nameWord.MatchString(name) {
		return "", "", fmt.Errorf("%q: want NAMESPACE/NAME", a.key+map[bool]string{true: "", false: "=" + a.value}[a.bare])
	}
	return ns, name, nil
}

// splitWords reads the words of a declaration: KEY or KEY=VALUE, separated by white space,
// where VALUE is a word without white space or double quotes, or a JSON string (as the
// templates' tojson prints it).
func splitWords(s string) ([]attr, error) {
	var out []attr
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '=' && s[i] != '"' {
			i++
		}
		key := s[start:i]
		if key == "" {
			return nil, fmt.Errorf("unexpected %q at column %d", s[i:i+1], i+1)
		}
		if i == len(s) || s[i] != '=' {
			if i < len(s) && s[i] == '"' {
				return nil, fmt.Errorf("unexpected \" after %s", key)
			}
			out = append(out, attr{key: key, bare: true})
			continue
		}
		i++ // =
		if i < len(s) && s[i] == '"' {
			end := quotedEnd(s, i)
			if end < 0 {
				return nil, fmt.Errorf("%s: the quoted value does not end", key)
			}
			var v string
			if err := json.Unmarshal([]byte(s[i:end]), &v); err != nil {
				return nil, fmt.Errorf("%s: the quoted value is not a JSON string: %w", key, err)
			}
			i = end
			if i < len(s) && s[i] != ' ' && s[i] != '\t' {
				return nil, fmt.Errorf("%s: want white space after the quoted value", key)
			}
			out = append(out, attr{key: key, value: v})
			continue
		}
		vs := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			if s[i] == '"' {
				return nil, fmt.Errorf("%s: a value with a \" must be quoted as a whole (tojson)", key)
			}
			i++
		}
		if vs == i {
			return nil, fmt.Errorf("%s= has no value", key)
		}
		out = append(out, attr{key: key, value: s[vs:i]})
	}
}

// quotedEnd is the index after the JSON string starting at s[i] ("), -1 if it does not end.
func quotedEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// Want is what the declarations say of one object.
type Want struct {
	// Generation is the declared generation (0: none).
	Generation int64
	// Conditions are a GatewayClass's or a Gateway's.
	Conditions []Condition
	// Addresses are a Gateway's declared addresses (none: the published ones).
	Addresses []Address
	// Listeners are a Gateway's, in the order declared (none: its status.listeners is left
	// as it is).
	Listeners []ListenerWant
	// Parents are an HTTPRoute's, in the order declared.
	Parents []ParentWant
	// Warning and WarningReason are an Ingress's (Declaration.Warning).
	Warning, WarningReason string
}

// ListenerWant is one listener of a Gateway: its conditions, the number of routes attached to
// it and the route kinds it supports.
type ListenerWant struct {
	Name       string
	Conditions []Condition
	Attached   int32
	Kinds      []RouteKind
}

// ParentWant is one parent of a route, and its conditions.
type ParentWant struct {
	Parent     Parent
	Conditions []Condition
}

// wantSet is what the declarations of a rendering say, by object: its Want, nil when that is
// zero (an Ingress that warns of nothing: nearly every object at 10,000 Ingresses). 56 bytes
// an object in the map rather than 184: the Writer keeps one, and makes the next beside it.
type wantSet map[Object]*Want

// get is o's Want (zero: not declared, or declared with nothing more to say).
func (s wantSet) get(o Object) Want {
	if p := s[o]; p != nil {
		return *p
	}
	return Want{}
}

// zeroWant says whether w is Want{} (TestZeroWant checks it against reflection, and fails
// when Want gets a field).
func zeroWant(w Want) bool {
	return w.Generation == 0 && w.Conditions == nil && w.Addresses == nil && w.Listeners == nil &&
		w.Parents == nil && w.Warning == "" && w.WarningReason == ""
}

// collect groups declarations by object. A declaration that repeats one already made (the same
// object, the same Gateway listener or the same route parent) is left out, with a problem when
// it says something else. A Gateway declared by its listeners only is accepted and programmed.
// The declarations are at their lines (their Line is not read).
func collect(decls []declAt) (wantSet, []error) {
	out := make(wantSet, len(decls)) // mostly one declaration per object
	first := newFirstTable(decls)    // the declaration that stands, by what it is of
	var problems []error
	for i, at := range decls {
		key := at.p.key()
		if j, ok := first.standing(key, i); ok {
			if prev := decls[j]; !sameDeclaration(prev.p.declaration(), at.p.declaration()) {
				problems = append(problems, fmt.Errorf("haproxy.cfg line %d: %s declared again, differently (line %d stands)", at.line, key, prev.line))
			}
			continue
		}
		d := at.p.declaration()
		kept, seen := out[d.Object]
		var w Want
		if kept != nil {
			w = *kept
		}
		if seen && w.Generation != d.Generation {
			problems = append(problems, fmt.Errorf("haproxy.cfg line %d: %s: generation %d, line %d said %d (the first stands)", at.line, d.Object, d.Generation, firstLine(decls, first, d.Object), w.Generation))
		}
		if !seen {
			w.Generation = d.Generation
		}
		switch {
		case d.Listener != "":
			w.Listeners = append(w.Listeners, ListenerWant{Name: d.Listener, Conditions: d.Conditions, Attached: d.Attached, Kinds: d.Kinds})
		case d.Kind == KindGateway || d.Kind == KindGatewayClass:
			w.Conditions, w.Addresses = d.Conditions, d.Addresses
		case d.Kind == KindHTTPRoute:
			w.Parents = append(w.Parents, ParentWant{Parent: d.Parent, Conditions: d.Conditions})
		case d.Kind == KindIngress:
			w.Warning, w.WarningReason = d.Warning, d.WarningReason
		}
		switch {
		case kept != nil:
			*kept = w
		case zeroWant(w):
			out[d.Object] = nil
		default:
			p := new(Want) // not &w: w would be made on the heap for every declaration
			*p = w
			out[d.Object] = p
		}
	}
	for o, p := range out {
		if o.Kind == KindGateway && (p == nil || p.Conditions == nil) {
			if p == nil {
				p = new(Want)
				out[o] = p
			}
			p.Conditions = defaultConditions(KindGateway)
		}
	}
	return out, problems
}

// declKey is what a declaration is of: an object, a Gateway's listener (Listener) or a
// route's parent (Parent); the other fields are zero (Parse sets Parent on routes only,
// Listener on Gateways only). A struct, not the string it prints: 3,000 routes made 3,000
// strings per rendering.
type declKey struct {
	Object
	Parent   Parent
	Listener string
}

func (k declKey) String() string {
	switch {
	case k.Kind == KindHTTPRoute:
		return k.Object.String() + " parent " + k.Parent.String()
	case k.Listener != "":
		return k.Object.String() + " listener " + k.Listener
	}
	return k.Object.String()
}

// sameDeclaration says whether two declarations of one thing say the same.
func sameDeclaration(a, b Declaration) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// defaultConditions are the conditions of a declaration of kind that says nothing of them.
func defaultConditions(kind string) []Condition {
	why := falseWhy{stated: map[string]bool{}}
	var out []Condition
	for _, cw := range conditionWords[kind] {
		c, _ := why.complete(Condition{Type: cw.typ, True: cw.def}, cw)
		out = append(out, c)
	}
	return out
}

// firstLine is the line of the first declaration of o that stands.
func firstLine(decls []declAt, first *firstTable, o Object) int {
	line := 0
	for _, e := range first.slots {
		if e == 0 {
			continue
		}
		if d := decls[e-1]; d.p.object() == o && (line == 0 || d.line < line) {
			line = d.line
		}
	}
	return line
}

func keyOf(d *Declaration) declKey { return declKey{d.Object, d.Parent, d.Listener} }

// firstTable is the declaration that stands for each declKey (the first one), as a
// map[declKey]int would be, without the map's copies of the keys: an open-addressed table of
// indexes into decls, 4 bytes a slot and two slots a declaration (the map of 10,000 Ingresses'
// keys was 2 MB per rendering, for the collector to mark).
type firstTable struct {
	seed  maphash.Seed
	slots []int32 // the index of a declaration plus 1; 0: an empty slot
	decls []declAt
}

func newFirstTable(decls []declAt) *firstTable {
	n := 16
	for n < 2*len(decls) {
		n *= 2
	}
	return &firstTable{seed: maphash.MakeSeed(), slots: make([]int32, n), decls: decls}
}

// standing returns the declaration that stands for key and true, or records decls[i] as the
// one that does (false).
func (t *firstTable) standing(key declKey, i int) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	for h := maphash.Comparable(t.seed, key) & mask; ; h = (h + 1) & mask {
		e := t.slots[h]
		if e == 0 {
			t.slots[h] = int32(i + 1)
			return i, false
		}
		if j := int(e - 1); t.decls[j].p.key() == key {
			return j, true
		}
	}
}
