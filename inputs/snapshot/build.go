package snapshot

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// Defaults for Options fields left empty.
const (
	DefaultNamespace             = "lb"
	DefaultServicesConfigMap     = "services"
	DefaultConfigConfigMap       = "config"
	DefaultCertificatesConfigMap = "certificates"
	DefaultKeysSecret            = "keys"
	DefaultTemplateKey           = "template"
	StatsUsername                = "stats"
)

// Options says where Build finds its inputs among the Objects and what else goes into the
// Snapshot. Empty names take the defaults above.
type Options struct {
	Namespace             string // the load balancer's namespace; default "lb"
	ServicesConfigMap     string // default "services"
	ConfigConfigMap       string // default "config"
	CertificatesConfigMap string // default "certificates"
	KeysSecret            string // default "keys"
	TemplateKey           string // default "template"
	// ConfigSecret, when set, names a Secret that holds the templates instead of the config
	// ConfigMap (same keys): the GitOps flow where a tool syncs haproxy.cfg into a Secret.
	ConfigSecret string
	// CertificateSelector selects TLS Secrets (type kubernetes.io/tls) in Namespace that are
	// certificates too, named after the Secret. nil selects none.
	CertificateSelector labels.Selector
	// TLSSecretNamespaces are the namespaces whose TLS Secrets are all certificates, named
	// NAMESPACE.NAME, whatever their labels (--tls-secret-namespaces): what an Ingress or a
	// Gateway listener of that namespace names. The zero value: none.
	TLSSecretNamespaces Namespaces
	// Env is the environment the templates see, already filtered by the caller's allow-list;
	// SecretEnv the names of those whose values are secret.
	Env              map[string]string
	SecretEnv        []string
	StatsPassword    string
	StatsPasswordSet bool
	// Resources are the watched resources (--watch): Assemble gives each, with its lookups,
	// from Objects.Resources.
	Resources watchspec.List
	// PodCache, when set, keeps the pod index of the last Build (the pods with their JSON
	// form, by namespace and label, each service's state) so that the next Build converts only
	// the pods that changed (by identity and resourceVersion) and selects again only the
	// services they concern. Give each source its own; Builds through one take turns.
	PodCache *PodCache
	// Peers says which pods are the HAProxy replicas (the `peers` value); zero: off.
	Peers PeersOptions
}

func (o Options) withDefaults() Options {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.Namespace, DefaultNamespace)
	def(&o.ServicesConfigMap, DefaultServicesConfigMap)
	def(&o.ConfigConfigMap, DefaultConfigConfigMap)
	def(&o.CertificatesConfigMap, DefaultCertificatesConfigMap)
	def(&o.KeysSecret, DefaultKeysSecret)
	def(&o.TemplateKey, DefaultTemplateKey)
	return o
}

// Build turns what a source has seen into a Snapshot, every input at its current version. It is
// a pure function: the same Objects and Options give an equal Snapshot.
//
// Bad input (a service entry, a certificate, the template ConfigMap) is reported as
// *InputError (Stage decode) naming the object and key; when there are several, the error
// lists all of them (errors.Join, in a deterministic order: services by key, then
// certificates, then templates) and errors.As finds the first. On error the Snapshot is nil.
// The sidecar itself does not stop at a bad input: it holds that input back (Decode, then
// Assemble with the versions package quarantine chooses); Build is for the tests and tools
// that want every input as it is.
//
// The Snapshot shares no memory with objs, except that a pod selected by several services is
// the same map in each service's "pods"; through a PodCache, a service that did not change is
// the very map of the last Snapshot: Snapshots are read-only.
func Build(objs *Objects, opts Options) (*Snapshot, error) {
	ins := Decode(objs, opts)
	if err := joinErrors(ins.Errors()); err != nil {
		return nil, err
	}
	return Assemble(objs, opts, ins.List)
}

// inputs are the load balancer namespace's ConfigMaps and Secrets by name, and the TLS
// Secrets of the TLS Secret namespaces.
type inputs struct {
	namespace  string
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	tlsSecrets []*corev1.Secret // sorted by namespace, then name (see namespaceTLSSecrets)
}

func indexObjects(objs *Objects, namespace string) inputs {
	in := inputs{
		namespace:  namespace,
		configMaps: map[string]*corev1.ConfigMap{},
		secrets:    map[string]*corev1.Secret{},
	}
	for _, cm := range objs.ConfigMaps {
		if cm != nil && cm.Namespace == namespace {
			in.configMaps[cm.Name] = cm
		}
	}
	for _, s := range objs.Secrets {
		if s != nil && s.Namespace == namespace {
			in.secrets[s.Name] = s
		}
	}
	return in
}

// decodeTemplates takes the templates from the config Secret when one is named, otherwise from
// the config ConfigMap; present is false when there is no config ConfigMap (the built-in
// default). A config Secret that does not exist is an input with an error.
func decodeTemplates(in inputs, opts Options) (t Input, present bool) {
	var data map[string]string
	t.Kind = KindTemplates
	if opts.ConfigSecret != "" {
		t.Ref = Ref{Kind: "Secret", Namespace: in.namespace, Name: opts.ConfigSecret}
		sec := in.secrets[opts.ConfigSecret]
		if sec == nil {
			t.Err = &InputError{Stage: StageDecode, Ref: t.Ref,
				Err: errors.New("the Secret holding the templates does not exist (yet)")}
			return t, true
		}
		data = make(map[string]string, len(sec.Data))
		for k, v := range secretData(sec) {
			data[k] = string(v)
		}
	} else {
		cm := in.configMaps[opts.ConfigConfigMap]
		if cm == nil {
			return t, false
		}
		t.Ref = Ref{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name}
		data = maps.Clone(cm.Data)
		if data == nil {
			data = map[string]string{}
		}
	}
	t.Data, t.Hash = data, dataHash(data)
	if _, ok := data[opts.TemplateKey]; !ok {
		keyRef := t.Ref
		keyRef.Key = opts.TemplateKey
		t.Err = &InputError{Stage: StageDecode, Ref: keyRef,
			Err: fmt.Errorf("the %s has no key %q for the main template%s", t.Ref.Kind, opts.TemplateKey, keyList(data))}
	}
	return t, true
}

func keyList(m map[string]string) string {
	if len(m) == 0 {
		return " (it has no data keys)"
	}
	keys := slices.Sorted(maps.Keys(m))
	if len(keys) > 10 {
		keys = append(keys[:10], "...")
	}
	return " (its keys: " + strings.Join(keys, ", ") + ")"
}

// appendErr appends err, flattening a joined error, so that the final join is flat.
func appendErr(errs []error, err error) []error {
	if err == nil {
		return errs
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return append(errs, j.Unwrap()...)
	}
	return append(errs, err)
}

// joinErrors returns nil, the only error, or all of them joined (errors.As finds the first).
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}
