package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Kinds of operator input: what an operator edits and what is held back, one by one, when it
// is bad (see package quarantine). Pods and EndpointSlices are not operator inputs: they are
// never held back.
const (
	KindService     = "service"     // one key of the services ConfigMap
	KindTemplates   = "templates"   // the template set (config ConfigMap or --config-secret)
	KindCertificate = "certificate" // one certificate (a ConfigMap/Secret pair entry, or a TLS Secret)
)

// Input is one operator input as the source has it now. Exactly one of Text (a service), Data
// (the templates) and PEM (a certificate) is its content.
type Input struct {
	Kind string
	Name string // the services key or certificate name; "" for the templates
	Ref  Ref    // where it comes from, for reports
	Hash string // of the content: equal hashes, equal content
	// Err says why the content cannot be used (it does not decode, a certificate without its
	// key...); nil when it can.
	Err *InputError `json:"-"`

	Text string            `json:",omitempty"` // KindService: the JSON entry
	Data map[string]string `json:",omitempty"` // KindTemplates: key -> template text
	PEM  []byte            `json:",omitempty"` // KindCertificate: chain then key, as HAProxy's crt wants
}

// ID names the input among all inputs: "service/web", "templates", "certificate/web".
func (in Input) ID() string {
	if in.Name == "" {
		return in.Kind
	}
	return in.Kind + "/" + in.Name
}

// Inputs is every operator input a source has now (Decode), sorted by ID.
type Inputs struct {
	List []Input
	// ServicesPresent and TemplatesPresent say whether the services ConfigMap and the object
	// holding the templates exist: a required object that disappears is held, not obeyed.
	ServicesPresent  bool
	TemplatesPresent bool
}

// Errors returns the decode errors of the inputs, in the order Build reports them: services
// by key, then certificates, then the templates.
func (ins Inputs) Errors() []error {
	var errs []error
	for _, kind := range []string{KindService, KindCertificate, KindTemplates} {
		for _, in := range ins.List {
			if in.Kind == kind && in.Err != nil {
				errs = append(errs, in.Err)
			}
		}
	}
	return errs
}

// Decode reads the operator inputs out of objs, each with its content hash and, when it is
// bad, why. Pods are not read here (see Assemble).
func Decode(objs *Objects, opts Options) Inputs {
	opts = opts.withDefaults()
	if objs == nil {
		objs = &Objects{}
	}
	in := indexObjects(objs, opts.Namespace)
	in.tlsSecrets = namespaceTLSSecrets(objs.Secrets, opts.TLSSecretNamespaces)
	var out Inputs
	servicesRef := Ref{Kind: "ConfigMap", Namespace: opts.Namespace, Name: opts.ServicesConfigMap}
	if cm := in.configMaps[opts.ServicesConfigMap]; cm != nil {
		out.ServicesPresent = true
		if list := decodeServices(cm, servicesRef, opts.PodCache); len(list) > 0 {
			out.List = list // the first: no copy of 10,000 inputs
		}
	}
	out.List = append(out.List, decodeCertificates(in, opts)...)
	if t, present := decodeTemplates(in, opts); present {
		out.TemplatesPresent = true
		out.List = append(out.List, t)
	}
	if !slices.IsSortedFunc(out.List, compareIDs) {
		slices.SortStableFunc(out.List, compareIDs)
	}
	return out
}

// compareIDs orders inputs as their IDs, without making them: no kind is a prefix of another,
// so kind then name is ID's order.
func compareIDs(a, b Input) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Assemble builds the Snapshot from the chosen version of each input (chosen need not be the
// current ones: a held input is given at its last good version, or left out) and the pods,
// EndpointSlices and watched objects of objs. Inputs with an Err are left out. Without a templates input the
// templates are the built-in default, except with ConfigSecret, where that is an error.
func Assemble(objs *Objects, opts Options, chosen []Input) (*Snapshot, error) {
	opts = opts.withDefaults()
	if objs == nil {
		objs = &Objects{}
	}
	snap := &Snapshot{
		TemplateKey: opts.TemplateKey,
		ServicesRef: Ref{Kind: "ConfigMap", Namespace: opts.Namespace, Name: opts.ServicesConfigMap},
		Env:         maps.Clone(opts.Env),
		SecretEnv:   opts.SecretEnv,
		Stats: Stats{
			Username:    StatsUsername,
			Password:    opts.StatsPassword,
			PasswordSet: opts.StatsPasswordSet,
		},
		Revision: objs.Revision,
	}
	if snap.Env == nil {
		snap.Env = map[string]string{}
	}
	services := serviceRun(chosen)
	copyServices := services == nil
	if copyServices {
		services = make([]Input, 0, len(chosen))
	}
	haveTemplates := false
	for _, in := range chosen {
		if in.Err != nil {
			continue
		}
		switch in.Kind {
		case KindService:
			if copyServices {
				services = append(services, in)
			}
		case KindCertificate:
			snap.Certificates = append(snap.Certificates, Certificate{Name: in.Name, PEM: in.PEM, Ref: in.Ref})
		case KindTemplates:
			snap.Templates, snap.TemplateRef, haveTemplates = maps.Clone(in.Data), in.Ref, true
		}
	}
	if !haveTemplates && opts.ConfigSecret != "" {
		return nil, &InputError{Stage: StageDecode, Ref: Ref{Kind: "Secret", Namespace: opts.Namespace, Name: opts.ConfigSecret},
			Err: errors.New("no usable templates: the Secret holding them does not exist or was never valid")}
	}
	if copyServices {
		slices.SortFunc(services, func(a, b Input) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(snap.Certificates, func(a, b Certificate) int { return strings.Compare(a.Name, b.Name) })
	var err error
	snap.Services, err = assembleServices(services, objs, opts.PodCache)
	if err != nil {
		return nil, err
	}
	snap.Resources = assembleResources(opts.Resources, objs.Resources, opts.PodCache)
	snap.Peers = BuildPeers(objs, opts.Peers)
	return snap, nil
}

// serviceRun is the services of chosen as a part of chosen itself, when they are one run of
// usable inputs sorted by name (chosen sorted by ID, as a Selection's is): read, never
// changed, with no copy of 10,000 inputs at each sync (1.8 MB). nil otherwise.
func serviceRun(chosen []Input) []Input {
	lo := slices.IndexFunc(chosen, func(in Input) bool { return in.Kind == KindService })
	if lo < 0 {
		return nil
	}
	hi := lo
	for hi < len(chosen) && chosen[hi].Kind == KindService {
		if chosen[hi].Err != nil || hi > lo && chosen[hi-1].Name >= chosen[hi].Name {
			return nil
		}
		hi++
	}
	for _, in := range chosen[hi:] {
		if in.Kind == KindService {
			return nil
		}
	}
	return chosen[lo:hi:hi]
}

// assembleServices builds the services through cache's pod index, and gives it back (none
// when the build did not finish: a half-updated index is not kept).
func assembleServices(services []Input, objs *Objects, cache *PodCache) ([]*record.Record, error) {
	ix := cache.take(objs.Pods, objs.ConvertedPods)
	done := false
	defer func() {
		if !done {
			cache.put(nil)
		}
	}()
	out, err := buildServices(services, ix, newEndpointIndex(objs.EndpointSlices, objs.ClusterEndpointSlices))
	done = true
	cache.put(ix)
	return out, err
}

// contentHash hashes parts, each length-prefixed so that no two lists share an encoding. It
// is an input's Hash, which the last good inputs' state file keeps: its encoding stays. (The
// hash of a rendering's files is content.Files.Hash.)
func contentHash(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		l := len(p)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dataHash hashes a key -> value map in key order.
func dataHash(data map[string]string) string {
	parts := make([]string, 0, 2*len(data))
	for _, k := range slices.Sorted(maps.Keys(data)) {
		parts = append(parts, k, data[k])
	}
	return contentHash(parts...)
}

// Builder decodes and assembles with fixed Options.
type Builder struct{ Options Options }

// Decode is Decode with b's Options.
func (b Builder) Decode(objs *Objects) Inputs { return Decode(objs, b.Options) }

// Assemble is Assemble with b's Options.
func (b Builder) Assemble(objs *Objects, chosen []Input) (*Snapshot, error) {
	return Assemble(objs, b.Options, chosen)
}
