package snapshot

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

func TestParseNamespaces(t *testing.T) {
	tests := []struct {
		in      string
		want    Namespaces
		has     []string
		hasNot  []string
		wantErr string
	}{
		{in: "", want: Namespaces{}, hasNot: []string{"web", ""}},
		{in: " , ", want: Namespaces{}},
		{in: "web", want: Namespaces{Names: []string{"web"}}, has: []string{"web"}, hasNot: []string{"we", "web2", ""}},
		{in: "shop, web,shop", want: Namespaces{Names: []string{"shop", "web"}}, has: []string{"shop", "web"}, hasNot: []string{"lb"}},
		{in: "*", want: Namespaces{All: true}, has: []string{"web", "lb", "kube-system"}, hasNot: []string{""}},
		{in: "*,web", wantErr: `"*" is every namespace`},
		{in: "Web", wantErr: `namespace "Web"`},
		{in: "a.b", wantErr: `namespace "a.b"`},
		{in: "web/x", wantErr: `namespace "web/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseNamespaces(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseNamespaces(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.All != tt.want.All || !slices.Equal(got.Names, tt.want.Names) {
				t.Errorf("ParseNamespaces(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.Empty() != (tt.want.Empty()) {
				t.Errorf("Empty() = %v", got.Empty())
			}
			for _, ns := range tt.has {
				if !got.Has(ns) {
					t.Errorf("Has(%q) = false", ns)
				}
			}
			for _, ns := range tt.hasNot {
				if got.Has(ns) {
					t.Errorf("Has(%q) = true", ns)
				}
			}
			// String gives back what ParseNamespaces reads.
			again, err := ParseNamespaces(got.String())
			if err != nil || again.All != got.All || !slices.Equal(again.Names, got.Names) {
				t.Errorf("ParseNamespaces(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}

// TestTLSSecretNamespaces: the TLS Secrets of the namespaces given are certificates named
// NAMESPACE.NAME, labelled or not; other Secrets and other namespaces give none.
func TestTLSSecretNamespaces(t *testing.T) {
	shopCert, shopKey := testcert.Pair(t, "shop.example.com")
	apiCert, apiKey := testcert.Pair(t, "api.example.com")
	tlsData := func(cert, key []byte) map[string][]byte {
		return map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}
	}
	objs := &Objects{Secrets: []*corev1.Secret{
		secret("web", "shop-tls", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
		secret("web", "api.tls", corev1.SecretTypeTLS, map[string]string{"haproxy-sidecar/certificate": "true"}, tlsData(apiCert, apiKey)),
		secret("web", "opaque", corev1.SecretTypeOpaque, nil, tlsData(apiCert, apiKey)),
		secret("shop", "shop-tls", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
		secret("other", "other-tls", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
		secret(ns, "lb-tls", corev1.SecretTypeTLS, nil, tlsData(apiCert, apiKey)),
		// A source may give a Secret twice (two informers): it is one certificate.
		secret("web", "shop-tls", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
	}}
	sel := labels.SelectorFromSet(labels.Set{"haproxy-sidecar/certificate": "true"})
	tests := []struct {
		namespaces string
		want       []string
	}{
		{namespaces: "", want: nil},
		{namespaces: "web", want: []string{"web.api.tls", "web.shop-tls"}},
		{namespaces: "web,shop", want: []string{"shop.shop-tls", "web.api.tls", "web.shop-tls"}},
		// The sidecar's own namespace is one like any other: its TLS Secrets as lb.NAME.
		{namespaces: "*", want: []string{"lb.lb-tls", "other.other-tls", "shop.shop-tls", "web.api.tls", "web.shop-tls"}},
	}
	for _, tt := range tests {
		t.Run(tt.namespaces, func(t *testing.T) {
			namespaces, err := ParseNamespaces(tt.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			// The certificate selector is about the sidecar's namespace only: it neither
			// restricts nor adds certificates of the other namespaces.
			for _, sel := range []labels.Selector{nil, sel} {
				snap, err := Build(objs, Options{TLSSecretNamespaces: namespaces, CertificateSelector: sel})
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, c := range snap.Certificates {
					names = append(names, c.Name)
					ns, name, _ := strings.Cut(c.Name, ".")
					if want := (Ref{Kind: "Secret", Namespace: ns, Name: name}); c.Ref != want {
						t.Errorf("%s: ref %v, want %v", c.Name, c.Ref, want)
					}
				}
				if !slices.Equal(names, tt.want) {
					t.Errorf("selector %v: certificates %v, want %v", sel, names, tt.want)
				}
			}
		})
	}
}

// TestTLSSecretNamespacesOneInputEach: each TLS Secret is an input of its own, so a bad one is
// held alone (its error names the Secret and key) while the others are usable; a name the
// sidecar's namespace already gives is an error on the other namespace's Secret.
func TestTLSSecretNamespacesOneInputEach(t *testing.T) {
	shopCert, shopKey := testcert.Pair(t, "shop.example.com")
	apiCert, _ := testcert.Pair(t, "api.example.com")
	_, otherKey := testcert.Pair(t, "other.example.com")
	tlsData := func(cert, key []byte) map[string][]byte {
		return map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}
	}
	objs := &Objects{Secrets: []*corev1.Secret{
		secret("web", "shop-tls", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
		secret("web", "api-tls", corev1.SecretTypeTLS, nil, tlsData(apiCert, otherKey)),
		secret("web", "no-key", corev1.SecretTypeTLS, nil, map[string][]byte{corev1.TLSCertKey: shopCert}),
		// A copy in the sidecar's namespace under the name web/clash gives: it wins.
		secret(ns, "web.clash", corev1.SecretTypeTLS, map[string]string{"cert": "yes"}, tlsData(shopCert, shopKey)),
		secret("web", "clash", corev1.SecretTypeTLS, nil, tlsData(shopCert, shopKey)),
	}}
	web, _ := ParseNamespaces("web")
	ins := Decode(objs, Options{TLSSecretNamespaces: web, CertificateSelector: labels.SelectorFromSet(labels.Set{"cert": "yes"})})
	type got struct {
		ref Ref
		err string
	}
	byID := map[string]got{}
	for _, in := range ins.List {
		g := got{ref: in.Ref}
		if in.Err != nil {
			g.err = in.Err.Error()
			noKeyMaterial(t, g.err, shopKey, otherKey)
		} else if len(in.PEM) == 0 || in.Hash == "" {
			t.Errorf("%s: no PEM or hash", in.ID())
		}
		byID[in.ID()] = g
	}
	want := map[string]struct {
		ref Ref
		err string
	}{
		"certificate/web.shop-tls": {ref: Ref{Kind: "Secret", Namespace: "web", Name: "shop-tls"}},
		"certificate/web.clash":    {ref: Ref{Kind: "Secret", Namespace: ns, Name: "web.clash"}},
		"certificate/web.api-tls": {ref: Ref{Kind: "Secret", Namespace: "web", Name: "api-tls", Key: "tls.key"},
			err: `Secret web/api-tls key "tls.key": the private key does not fit the certificate in Secret web/api-tls key "tls.crt"`},
		"certificate/web.no-key": {ref: Ref{Kind: "Secret", Namespace: "web", Name: "no-key"}, err: `no "tls.key"`},
		"certificate/web.clash@Secret web/clash": {ref: Ref{Kind: "Secret", Namespace: "web", Name: "clash"},
			err: `certificate name "web.clash" is already given by Secret lb/web.clash`},
	}
	for id, w := range want {
		g, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("no input %s (inputs: %v)", id, byID)
		case g.ref != w.ref:
			t.Errorf("%s: ref %v, want %v", id, g.ref, w.ref)
		case (w.err == "") != (g.err == "") || !strings.Contains(g.err, w.err):
			t.Errorf("%s: error %q, want %q", id, g.err, w.err)
		}
	}
	if len(byID) != len(want) {
		t.Errorf("inputs %v, want %d", byID, len(want))
	}
	// Assembled with the inputs as they are (the bad ones left out), the good ones are there.
	snap, err := Assemble(objs, Options{}, ins.List)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range snap.Certificates {
		names = append(names, c.Name)
	}
	if want := []string{"web.clash", "web.shop-tls"}; !slices.Equal(names, want) {
		t.Errorf("certificates %v, want %v", names, want)
	}
}
