package snapshot

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
)

var (
	certExtensions = []string{".pem", ".crt"}
	keyExtensions  = []string{".pem", ".key"}
)

// pemPart is one half of a certificate: a data key of the certificates ConfigMap or of the keys
// Secret, or a TLS Secret's tls.crt / tls.key.
type pemPart struct {
	ref  Ref
	data []byte
}

// decodeCertificates pairs the certificates ConfigMap with the keys Secret by name, adds the
// selected TLS Secrets and the TLS Secrets of the TLS Secret namespaces, and checks every
// pair: one input per certificate name, with the error when it is not usable. Errors never
// quote PEM content.
func decodeCertificates(in inputs, opts Options) []Input {
	var out []Input
	// bad records an unusable certificate; name is its input's name (made unique when the
	// name itself is the problem: two keys giving one name).
	bad := func(name string, ref Ref, err error) {
		ie, ok := err.(*InputError)
		if !ok {
			ie = &InputError{Stage: StageDecode, Ref: ref, Err: err}
		}
		out = append(out, Input{Kind: KindCertificate, Name: name, Ref: ie.Ref, Err: ie})
	}
	fail := func(name string, ref Ref, format string, args ...any) {
		bad(name, ref, fmt.Errorf(format, args...))
	}
	cmRef := Ref{Kind: "ConfigMap", Namespace: in.namespace, Name: opts.CertificatesConfigMap}
	secRef := Ref{Kind: "Secret", Namespace: in.namespace, Name: opts.KeysSecret}

	var certData map[string][]byte
	if cm := in.configMaps[opts.CertificatesConfigMap]; cm != nil {
		certData = configMapData(cm)
	}
	var keyData map[string][]byte
	if s := in.secrets[opts.KeysSecret]; s != nil {
		keyData = secretData(s)
	}
	certs := byName(cmRef, certData, certExtensions, fail)
	keys := byName(secRef, keyData, keyExtensions, fail)

	taken := map[string]Ref{}
	for _, name := range slices.Sorted(maps.Keys(certs)) {
		c := certs[name]
		taken[name] = c.ref
		k, ok := keys[name]
		if !ok {
			fail(name, c.ref, "certificate %q has no private key: the Secret %s/%s has no key %s",
				name, secRef.Namespace, secRef.Name, alternatives(name, keyExtensions))
			continue
		}
		pemData, err := pair(c, k)
		if err != nil {
			bad(name, c.ref, err)
			continue
		}
		out = append(out, Input{Kind: KindCertificate, Name: name, Ref: c.ref, PEM: pemData, Hash: contentHash(string(pemData))})
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		if _, ok := certs[name]; !ok {
			fail(name, keys[name].ref, "private key %q has no certificate: the ConfigMap %s/%s has no key %s",
				name, cmRef.Namespace, cmRef.Name, alternatives(name, certExtensions))
		}
	}

	// The selected TLS Secrets of the namespace, by their name; then the TLS Secrets of the
	// TLS Secret namespaces, as NAMESPACE.NAME. A name already given is an error on the later
	// one: the sidecar's namespace wins.
	tlsInput := func(name string, s *corev1.Secret) {
		ref := Ref{Kind: "Secret", Namespace: s.Namespace, Name: s.Name}
		if err := content.CheckCertName(name); err != nil {
			fail(name, ref, "%v", err)
			return
		}
		if prev, ok := taken[name]; ok {
			fail(name+"@"+ref.String(), ref, "certificate name %q is already given by %s", name, prev)
			return
		}
		taken[name] = ref
		c, err := tlsSecretPEM(s, ref)
		if err != nil {
			bad(name, ref, err)
			return
		}
		c.Name = name
		out = append(out, c)
	}
	for _, s := range tlsSecrets(in, opts) {
		tlsInput(s.Name, s)
	}
	for _, s := range in.tlsSecrets {
		tlsInput(NamespacedCertName(s.Namespace, s.Name), s)
	}
	// One input per name: a rejected entry that shares its name with another input is told
	// apart by where it comes from.
	count := map[string]int{}
	for _, c := range out {
		count[c.Name]++
	}
	for i, c := range out {
		if count[c.Name] > 1 && c.Err != nil {
			out[i].Name = c.Name + "@" + c.Ref.String()
		}
	}
	return out
}

// tlsSecretPEM pairs a TLS Secret's tls.crt and tls.key into a certificate input (without its
// name).
func tlsSecretPEM(s *corev1.Secret, ref Ref) (Input, error) {
	data := secretData(s)
	crt, hasCrt := data[corev1.TLSCertKey]
	key, hasKey := data[corev1.TLSPrivateKeyKey]
	switch {
	case !hasCrt && !hasKey:
		return Input{}, fmt.Errorf("TLS Secret has neither %q nor %q", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	case !hasCrt:
		return Input{}, fmt.Errorf("TLS Secret has no %q: the private key has no certificate", corev1.TLSCertKey)
	case !hasKey:
		return Input{}, fmt.Errorf("TLS Secret has no %q: the certificate has no private key", corev1.TLSPrivateKeyKey)
	}
	crtRef, keyRef := ref, ref
	crtRef.Key, keyRef.Key = corev1.TLSCertKey, corev1.TLSPrivateKeyKey
	pemData, err := pair(pemPart{ref: crtRef, data: crt}, pemPart{ref: keyRef, data: key})
	if err != nil {
		return Input{}, err
	}
	return Input{Kind: KindCertificate, Ref: ref, PEM: pemData, Hash: contentHash(string(pemData))}, nil
}

// byName maps certificate names to the data keys that give them: "web.pem", "web.<ext>" and
// "web" all give "web". Bad names and two keys giving one name are errors.
func byName(objRef Ref, data map[string][]byte, exts []string, fail func(string, Ref, string, ...any)) map[string]pemPart {
	out := map[string]pemPart{}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		ref := objRef
		ref.Key = key
		name := key
		for _, ext := range exts {
			if n, ok := strings.CutSuffix(key, ext); ok {
				name = n
				break
			}
		}
		if err := content.CheckCertName(name); err != nil {
			fail(name, ref, "%v", err)
			continue
		}
		if prev, ok := out[name]; ok {
			fail(name+"@"+ref.String(), ref, "certificate name %q is already given by key %q", name, prev.ref.Key)
			continue
		}
		out[name] = pemPart{ref: ref, data: data[key]}
	}
	return out
}

func alternatives(name string, exts []string) string {
	var alts []string
	for _, ext := range exts {
		alts = append(alts, fmt.Sprintf("%q", name+ext))
	}
	return strings.Join(alts, ", ") + fmt.Sprintf(" or %q", name)
}

// pair checks a certificate chain and its private key and returns the PEM HAProxy's `crt`
// wants: the chain, then the key.
func pair(cert, key pemPart) ([]byte, error) {
	fail := func(ref Ref, format string, args ...any) error {
		return &InputError{Stage: StageDecode, Ref: ref, Err: fmt.Errorf(format, args...)}
	}
	n := 0
	for rest := cert.data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			n++
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				return nil, fail(cert.ref, "certificate %d of the chain does not parse: %v", n, err)
			}
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			return nil, fail(cert.ref, "holds a private key: private keys belong in the Secret (%s), not with the certificate", key.ref)
		}
	}
	if n == 0 {
		return nil, fail(cert.ref, "no PEM certificate found (want a \"-----BEGIN CERTIFICATE-----\" block)")
	}
	keys := 0
	for rest := key.data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			keys++
		}
	}
	switch {
	case keys == 0:
		return nil, fail(key.ref, "no PEM private key found (want a \"-----BEGIN ... PRIVATE KEY-----\" block)")
	case keys > 1:
		return nil, fail(key.ref, "holds %d private keys: want exactly one", keys)
	}
	// The messages of crypto/tls name PEM block types and key types, never key material.
	if _, err := tls.X509KeyPair(cert.data, key.data); err != nil {
		return nil, fail(key.ref, "the private key does not fit the certificate in %s: %v", cert.ref, err)
	}
	var b bytes.Buffer
	b.Write(bytes.TrimRight(cert.data, " \t\r\n"))
	b.WriteString("\n")
	b.Write(bytes.TrimRight(key.data, " \t\r\n"))
	b.WriteString("\n")
	return b.Bytes(), nil
}

// tlsSecrets returns the TLS Secrets of the namespace the selector matches, by name.
func tlsSecrets(in inputs, opts Options) []*corev1.Secret {
	if opts.CertificateSelector == nil {
		return nil
	}
	var out []*corev1.Secret
	for _, name := range slices.Sorted(maps.Keys(in.secrets)) {
		s := in.secrets[name]
		if s.Type != corev1.SecretTypeTLS || name == opts.KeysSecret {
			continue
		}
		if opts.CertificateSelector.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	return out
}

// NamespacedCertName is the name of the certificate a TLS Secret of the TLS Secret namespaces
// gives: NAMESPACE.NAME. Namespaces have no dots, so the name says which Secret it is.
func NamespacedCertName(namespace, name string) string { return namespace + "." + name }

// namespaceTLSSecrets returns the TLS Secrets of the namespaces, sorted by namespace then name,
// each once (a source may give a Secret twice: the sidecar's namespace's TLS Secrets are also
// read for the certificate selector).
func namespaceTLSSecrets(secrets []*corev1.Secret, namespaces Namespaces) []*corev1.Secret {
	if namespaces.Empty() {
		return nil
	}
	type key struct{ namespace, name string }
	byKey := map[key]*corev1.Secret{}
	for _, s := range secrets {
		if s != nil && s.Type == corev1.SecretTypeTLS && namespaces.Has(s.Namespace) {
			byKey[key{s.Namespace, s.Name}] = s
		}
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]*corev1.Secret, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// Namespaces is a set of namespaces, or every namespace: the value of --tls-secret-namespaces
// ("web,shop", "*", or "" for none). The zero value is none.
type Namespaces struct {
	All   bool     // every namespace ("*")
	Names []string // sorted, each once; empty with All
}

// ParseNamespaces reads comma-separated namespace names, or "*" for every namespace; white
// space around the names and empty items are ignored, so "" is none.
func ParseNamespaces(s string) (Namespaces, error) {
	var n Namespaces
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case name == "*":
			n.All = true
		default:
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return Namespaces{}, fmt.Errorf("namespace %q: %s", name, strings.Join(errs, "; "))
			}
			if !slices.Contains(n.Names, name) {
				n.Names = append(n.Names, name)
			}
		}
	}
	if n.All && len(n.Names) > 0 {
		return Namespaces{}, fmt.Errorf("%q: \"*\" is every namespace; give it alone, or name the namespaces", s)
	}
	slices.Sort(n.Names)
	return n, nil
}

// Empty reports whether n holds no namespace.
func (n Namespaces) Empty() bool { return !n.All && len(n.Names) == 0 }

// Has reports whether namespace is one of n.
func (n Namespaces) Has(namespace string) bool {
	if n.All {
		return namespace != ""
	}
	_, found := slices.BinarySearch(n.Names, namespace)
	return found
}

// String is n as ParseNamespaces reads it.
func (n Namespaces) String() string {
	if n.All {
		return "*"
	}
	return strings.Join(n.Names, ",")
}

// configMapData merges data and binaryData (a PEM may be stored in either).
func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	out := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	return out
}

// secretData is data with stringData folded in, as the API server does (stringData wins).
func secretData(s *corev1.Secret) map[string][]byte {
	if len(s.StringData) == 0 {
		return s.Data
	}
	out := maps.Clone(s.Data)
	if out == nil {
		out = map[string][]byte{}
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out
}
