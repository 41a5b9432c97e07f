package snapshot

import (
	"bytes"
	"crypto/tls"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

func TestBuildCertificates(t *testing.T) {
	webCert, webKey := testcert.Pair(t, "web.example.com")
	apiCert, apiKey := testcert.Pair(t, "api.example.com")
	rawCert, rawKey := testcert.Pair(t, "raw.example.com")
	tlsCert, tlsKey := testcert.Pair(t, "tls.example.com")
	sel := labels.SelectorFromSet(labels.Set{"haproxy": "yes"})

	tests := []struct {
		name    string
		objs    Objects
		sel     labels.Selector
		want    []string // certificate names
		wantRef map[string]Ref
	}{
		{name: "nothing", want: nil},
		{
			name: "pairs by name and extension",
			objs: Objects{
				ConfigMaps: []*corev1.ConfigMap{configMap(ns, "certificates", map[string]string{
					"web.pem": string(webCert), "api.crt": string(apiCert), "raw": string(rawCert),
				})},
				Secrets: []*corev1.Secret{secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{
					"web.key": webKey, "api.pem": apiKey, "raw": rawKey,
				})},
			},
			want: []string{"api", "raw", "web"},
			wantRef: map[string]Ref{
				"api": {Kind: "ConfigMap", Namespace: ns, Name: "certificates", Key: "api.crt"},
			},
		},
		{
			name: "keys from stringData",
			objs: Objects{
				ConfigMaps: []*corev1.ConfigMap{configMap(ns, "certificates", map[string]string{"web.pem": string(webCert)})},
				Secrets: []*corev1.Secret{func() *corev1.Secret {
					s := secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{"web.key": apiKey})
					s.StringData = map[string]string{"web.key": string(webKey)} // wins over data
					return s
				}()},
			},
			want: []string{"web"},
		},
		{
			name: "certificate in binaryData",
			objs: Objects{
				ConfigMaps: []*corev1.ConfigMap{func() *corev1.ConfigMap {
					cm := configMap(ns, "certificates", nil)
					cm.BinaryData = map[string][]byte{"web.pem": webCert}
					return cm
				}()},
				Secrets: []*corev1.Secret{secret(ns, "keys", "", nil, map[string][]byte{"web.pem": webKey})},
			},
			want: []string{"web"},
		},
		{
			name: "selected TLS Secrets",
			objs: Objects{
				Secrets: []*corev1.Secret{
					secret(ns, "shop-tls", corev1.SecretTypeTLS, map[string]string{"haproxy": "yes"},
						map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey, "ca.crt": webCert}),
					secret(ns, "unlabelled", corev1.SecretTypeTLS, nil,
						map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey}),
					secret(ns, "opaque", corev1.SecretTypeOpaque, map[string]string{"haproxy": "yes"},
						map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey}),
					secret("elsewhere", "other-tls", corev1.SecretTypeTLS, map[string]string{"haproxy": "yes"},
						map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey}),
				},
			},
			sel:     sel,
			want:    []string{"shop-tls"},
			wantRef: map[string]Ref{"shop-tls": {Kind: "Secret", Namespace: ns, Name: "shop-tls"}},
		},
		{
			name: "no selector: TLS Secrets are not certificates",
			objs: Objects{Secrets: []*corev1.Secret{
				secret(ns, "shop-tls", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey}),
			}},
			want: nil,
		},
		{
			name: "both sources, sorted",
			objs: Objects{
				ConfigMaps: []*corev1.ConfigMap{configMap(ns, "certificates", map[string]string{"web.pem": string(webCert)})},
				Secrets: []*corev1.Secret{
					secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{"web.pem": webKey}),
					secret(ns, "a-tls", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey}),
				},
			},
			sel:  labels.Everything(),
			want: []string{"a-tls", "web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := Build(&tt.objs, Options{CertificateSelector: tt.sel})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range snap.Certificates {
				names = append(names, c.Name)
				// The PEM is what HAProxy's crt loads: certificate and key, and they fit.
				if _, err := tls.X509KeyPair(c.PEM, c.PEM); err != nil {
					t.Errorf("%s: PEM is not a usable certificate + key: %v", c.Name, err)
				}
				if i, j := bytes.Index(c.PEM, []byte("CERTIFICATE")), bytes.Index(c.PEM, []byte("PRIVATE KEY")); i < 0 || j < i {
					t.Errorf("%s: want the certificate before the key", c.Name)
				}
				if ref, ok := tt.wantRef[c.Name]; ok && c.Ref != ref {
					t.Errorf("%s: ref = %v, want %v", c.Name, c.Ref, ref)
				}
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("certificates = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestBuildCertificateStringDataWins(t *testing.T) {
	cert, key := testcert.Pair(t, "web")
	_, otherKey := testcert.Pair(t, "other")
	s := secret(ns, "keys", corev1.SecretTypeOpaque, nil, map[string][]byte{"web.key": otherKey})
	s.StringData = map[string]string{"web.key": string(key)}
	snap, err := Build(&Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap(ns, "certificates", map[string]string{"web.pem": string(cert)})},
		Secrets:    []*corev1.Secret{s},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(snap.Certificates[0].PEM, bytes.TrimSpace(key)) {
		t.Error("the key from stringData is not the one used")
	}
}

func TestBuildCertificateErrors(t *testing.T) {
	webCert, webKey := testcert.Pair(t, "web")
	_, otherKey := testcert.Pair(t, "other")
	tlsCert, tlsKey := testcert.Pair(t, "tls")
	cmRef := func(key string) Ref { return Ref{Kind: "ConfigMap", Namespace: ns, Name: "certificates", Key: key} }
	keyRef := func(key string) Ref { return Ref{Kind: "Secret", Namespace: ns, Name: "keys", Key: key} }
	garbageCert := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	garbageKey := []byte("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5IGF0IGFsbA==\n-----END PRIVATE KEY-----\n")

	pairObjs := func(certs map[string]string, keys map[string][]byte, extra ...*corev1.Secret) Objects {
		o := Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "certificates", certs)}}
		if keys != nil {
			o.Secrets = append(o.Secrets, secret(ns, "keys", corev1.SecretTypeOpaque, nil, keys))
		}
		o.Secrets = append(o.Secrets, extra...)
		return o
	}
	tests := []struct {
		name    string
		objs    Objects
		ref     Ref
		reasons []string
	}{
		{
			name:    "certificate does not parse",
			objs:    pairObjs(map[string]string{"web.pem": string(garbageCert)}, map[string][]byte{"web.key": webKey}),
			ref:     cmRef("web.pem"),
			reasons: []string{"certificate 1 of the chain does not parse"},
		},
		{
			name:    "no PEM in the certificate",
			objs:    pairObjs(map[string]string{"web.pem": "hello"}, map[string][]byte{"web.key": webKey}),
			ref:     cmRef("web.pem"),
			reasons: []string{"no PEM certificate found"},
		},
		{
			name:    "private key in the ConfigMap",
			objs:    pairObjs(map[string]string{"web.pem": string(webCert) + string(webKey)}, map[string][]byte{"web.key": webKey}),
			ref:     cmRef("web.pem"),
			reasons: []string{"holds a private key", "belong in the Secret"},
		},
		{
			name:    "key does not parse",
			objs:    pairObjs(map[string]string{"web.pem": string(webCert)}, map[string][]byte{"web.key": garbageKey}),
			ref:     keyRef("web.key"),
			reasons: []string{"does not fit the certificate", "failed to parse private key"},
		},
		{
			name:    "no PEM in the key",
			objs:    pairObjs(map[string]string{"web.pem": string(webCert)}, map[string][]byte{"web.key": []byte("secret")}),
			ref:     keyRef("web.key"),
			reasons: []string{"no PEM private key found"},
		},
		{
			name:    "two keys",
			objs:    pairObjs(map[string]string{"web.pem": string(webCert)}, map[string][]byte{"web.key": append(append([]byte{}, webKey...), otherKey...)}),
			ref:     keyRef("web.key"),
			reasons: []string{"holds 2 private keys"},
		},
		{
			name:    "key does not match the certificate",
			objs:    pairObjs(map[string]string{"web.pem": string(webCert)}, map[string][]byte{"web.key": otherKey}),
			ref:     keyRef("web.key"),
			reasons: []string{"does not fit the certificate", `ConfigMap lb/certificates key "web.pem"`, "does not match"},
		},
		{
			name:    "certificate without a key",
			objs:    pairObjs(map[string]string{"web.crt": string(webCert)}, map[string][]byte{}),
			ref:     cmRef("web.crt"),
			reasons: []string{`certificate "web" has no private key`, `"web.pem", "web.key" or "web"`},
		},
		{
			name:    "certificate without a keys Secret",
			objs:    pairObjs(map[string]string{"web.crt": string(webCert)}, nil),
			ref:     cmRef("web.crt"),
			reasons: []string{"has no private key"},
		},
		{
			name:    "key without a certificate",
			objs:    pairObjs(map[string]string{}, map[string][]byte{"web.key": webKey}),
			ref:     keyRef("web.key"),
			reasons: []string{`private key "web" has no certificate`, `"web.pem", "web.crt" or "web"`},
		},
		{
			name:    "name with ..",
			objs:    pairObjs(map[string]string{"a..b.pem": string(webCert)}, map[string][]byte{"a..b.pem": webKey}),
			ref:     cmRef("a..b.pem"),
			reasons: []string{`contains ".."`},
		},
		{
			name:    "name with a slash",
			objs:    pairObjs(map[string]string{"a/b.pem": string(webCert)}, map[string][]byte{}),
			ref:     cmRef("a/b.pem"),
			reasons: []string{"characters other than"},
		},
		{
			name:    "name with a leading dot",
			objs:    pairObjs(map[string]string{".web.pem": string(webCert)}, map[string][]byte{}),
			ref:     cmRef(".web.pem"),
			reasons: []string{"starts with a dot"},
		},
		{
			name:    "empty name",
			objs:    pairObjs(map[string]string{".pem": string(webCert)}, map[string][]byte{}),
			ref:     cmRef(".pem"),
			reasons: []string{"empty certificate name"},
		},
		{
			name:    "name with a space",
			objs:    pairObjs(map[string]string{}, map[string][]byte{"my key": webKey}),
			ref:     keyRef("my key"),
			reasons: []string{"characters other than"},
		},
		{
			name:    "two certificate keys give one name",
			objs:    pairObjs(map[string]string{"web.crt": string(webCert), "web.pem": string(webCert)}, map[string][]byte{"web.key": webKey}),
			ref:     cmRef("web.pem"),
			reasons: []string{`certificate name "web" is already given by key "web.crt"`},
		},
		{
			name:    "two private keys give one name",
			objs:    pairObjs(map[string]string{"web.crt": string(webCert)}, map[string][]byte{"web.key": webKey, "web": webKey}),
			ref:     keyRef("web.key"),
			reasons: []string{`already given by key "web"`},
		},
		{
			name: "TLS Secret takes a name the ConfigMap gives",
			objs: pairObjs(map[string]string{"web.pem": string(webCert)}, map[string][]byte{"web.key": webKey},
				secret(ns, "web", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.crt": tlsCert, "tls.key": tlsKey})),
			ref:     Ref{Kind: "Secret", Namespace: ns, Name: "web"},
			reasons: []string{`certificate name "web" is already given by ConfigMap lb/certificates key "web.pem"`},
		},
		{
			name: "TLS Secret without tls.key",
			objs: pairObjs(map[string]string{}, map[string][]byte{},
				secret(ns, "shop", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.crt": tlsCert})),
			ref:     Ref{Kind: "Secret", Namespace: ns, Name: "shop"},
			reasons: []string{`no "tls.key"`},
		},
		{
			name: "TLS Secret without tls.crt",
			objs: pairObjs(map[string]string{}, map[string][]byte{},
				secret(ns, "shop", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.key": tlsKey})),
			ref:     Ref{Kind: "Secret", Namespace: ns, Name: "shop"},
			reasons: []string{`no "tls.crt"`},
		},
		{
			name: "TLS Secret with a mismatched key",
			objs: pairObjs(map[string]string{}, map[string][]byte{},
				secret(ns, "shop", corev1.SecretTypeTLS, nil, map[string][]byte{"tls.crt": tlsCert, "tls.key": otherKey})),
			ref:     Ref{Kind: "Secret", Namespace: ns, Name: "shop", Key: "tls.key"},
			reasons: []string{"does not fit the certificate", `key "tls.crt"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(&tt.objs, Options{CertificateSelector: labels.Everything()})
			inputError(t, err, tt.ref, tt.reasons...)
			noKeyMaterial(t, err.Error(), webKey, otherKey, tlsKey, garbageKey)
		})
	}
}
