package watcher

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/etcdtest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

func namespaces(t *testing.T, s string) snapshot.Namespaces {
	t.Helper()
	n, err := snapshot.ParseNamespaces(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func typedSecret(ns, name string, typ corev1.SecretType, data string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       typ,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(data), corev1.TLSPrivateKeyKey: []byte("key of " + data)},
	}
}

// secretKeys lists the Secrets of objs as "ns/name", sorted.
func secretKeys(objs *snapshot.Objects) []string {
	var out []string
	if objs == nil {
		return nil
	}
	for _, s := range objs.Secrets {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

func findSecret(objs *snapshot.Objects, ns, name string) *corev1.Secret {
	if objs == nil {
		return nil
	}
	for _, s := range objs.Secrets {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

// TestStoredSecretType reads a Secret's type from the bytes kube-apiserver stores, without
// decoding it; whatever the bytes do not say is left to the decoder.
func TestStoredSecretType(t *testing.T) {
	enc := func(s *corev1.Secret, e etcdtest.Encoding) []byte {
		b, err := etcdtest.Encode(s, e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tls := typedSecret("web", "shop-tls", corev1.SecretTypeTLS, "cert")
	tls.StringData = map[string]string{"more": "data"}
	tls.Immutable = new(bool)
	pbTLS := enc(tls, etcdtest.Protobuf)
	tests := []struct {
		name   string
		value  []byte
		want   string
		wantOK bool
	}{
		{"TLS, protobuf", pbTLS, "kubernetes.io/tls", true},
		{"Opaque, protobuf", enc(typedSecret("web", "o", corev1.SecretTypeOpaque, "x"), etcdtest.Protobuf), "Opaque", true},
		{"no data, protobuf", enc(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "e"}, Type: corev1.SecretTypeDockerConfigJson}, etcdtest.Protobuf), "kubernetes.io/dockerconfigjson", true},
		{"JSON", enc(tls, etcdtest.JSON), "", false},
		{"encrypted", []byte("k8s:enc:aescbc:v1:key1:\x00\x01garbage"), "", false},
		{"truncated", pbTLS[:len(pbTLS)/2], "", false},
		{"magic only", []byte("k8s\x00"), "", false},
		{"empty", nil, "", false},
		{"garbage after the magic", []byte("k8s\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := storedSecretType(tt.value)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("storedSecretType = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestFileTLSSecretNamespaces: with SecretNamespace set, the file source keeps every Secret of
// that namespace and only the TLS Secrets of the TLS Secret namespaces elsewhere, whether the
// objects are decoded or found in its cache; a watched secrets.v1 still sees them all.
func TestFileTLSSecretNamespaces(t *testing.T) {
	dir := t.TempDir()
	manifests := `apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: lb}
stringData: {web.key: x}
---
apiVersion: v1
kind: Secret
metadata: {name: lb-tls, namespace: lb}
type: kubernetes.io/tls
data: {tls.crt: eA==, tls.key: eA==}
---
apiVersion: v1
kind: Secret
metadata: {name: shop-tls, namespace: web}
type: kubernetes.io/tls
data: {tls.crt: eA==, tls.key: eA==}
---
apiVersion: v1
kind: Secret
metadata: {name: password, namespace: web}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Secret
metadata: {name: other-tls, namespace: other}
type: kubernetes.io/tls
data: {tls.crt: eA==, tls.key: eA==}
`
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	// The same as a List in JSON, the path of the fast scanner.
	list := `{"apiVersion": "v1", "kind": "List", "items": [
	  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api-tls", "namespace": "web"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA==", "tls.key": "eA=="}},
	  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "web"}, "type": "Opaque", "data": {"t": "eA=="}}]}`
	if err := os.WriteFile(filepath.Join(dir, "list.json"), []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    *File
		want []string
	}{
		{"every Secret without SecretNamespace", &File{Dir: dir}, []string{"lb/keys", "lb/lb-tls", "other/other-tls", "web/api-tls", "web/password", "web/shop-tls", "web/token"}},
		{"web", &File{Dir: dir, SecretNamespace: "lb", TLSSecretNamespaces: namespaces(t, "web")}, []string{"lb/keys", "lb/lb-tls", "web/api-tls", "web/shop-tls"}},
		{"web, with the cache", &File{Dir: dir, SecretNamespace: "lb", TLSSecretNamespaces: namespaces(t, "web"), PodConverter: &snapshot.PodConverter{}}, []string{"lb/keys", "lb/lb-tls", "web/api-tls", "web/shop-tls"}},
		{"*", &File{Dir: dir, SecretNamespace: "lb", TLSSecretNamespaces: namespaces(t, "*"), PodConverter: &snapshot.PodConverter{}}, []string{"lb/keys", "lb/lb-tls", "other/other-tls", "web/api-tls", "web/shop-tls"}},
		{"none", &File{Dir: dir, SecretNamespace: "lb"}, []string{"lb/keys", "lb/lb-tls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 2 { // decoded, then as the last read left them (and the cache)
				objs, err := tt.f.Objects(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if got := secretKeys(objs); !slices.Equal(got, tt.want) {
					t.Errorf("read %d: Secrets %v, want %v", i+1, got, tt.want)
				}
			}
		})
	}
	t.Run("a watched secrets.v1 sees every Secret", func(t *testing.T) {
		f := &File{Dir: dir, SecretNamespace: "lb", TLSSecretNamespaces: namespaces(t, "web"), Watch: watchList(t, "secrets.v1")}
		objs, err := f.Objects(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := secretKeys(objs), []string{"lb/keys", "lb/lb-tls", "web/api-tls", "web/shop-tls"}; !slices.Equal(got, want) {
			t.Errorf("Secrets %v, want %v", got, want)
		}
		if got := watchedKeys(objs); got != "secrets: lb/keys lb/lb-tls other/other-tls web/api-tls web/password web/shop-tls web/token" {
			t.Errorf("watched: %s", got)
		}
	})
}

// TestTLSSecretsFromTheAPIServerAndEtcd: the kube source (informers with the field selector
// type=kubernetes.io/tls) and the etcd source (the namespaces' keys, other types dropped before
// decoding) read the same TLS Secrets of the TLS Secret namespaces from a real kube-apiserver,
// and nothing else; changes are followed; a namespace RBAC forbids is an error naming what to
// grant, not a wait.
func TestTLSSecretsFromTheAPIServerAndEtcd(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	for _, ns := range []string{"lb", "web", "shop", "other"} {
		env.Namespace(t, ns)
	}
	env.ApplySecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "keys"}, StringData: map[string]string{"web.key": "x"}})
	for _, s := range []*corev1.Secret{
		typedSecret("lb", "lb-tls", corev1.SecretTypeTLS, "lb"),
		typedSecret("web", "shop-tls", corev1.SecretTypeTLS, "shop 1"),
		typedSecret("web", "password", corev1.SecretTypeOpaque, "hunter2"),
		typedSecret("web", "basic", corev1.SecretTypeBasicAuth, "basic"),
		typedSecret("shop", "shop-tls", corev1.SecretTypeTLS, "shop in shop"),
		typedSecret("other", "other-tls", corev1.SecretTypeTLS, "other"),
	} {
		if s.Type == corev1.SecretTypeBasicAuth {
			s.Data = map[string][]byte{corev1.BasicAuthUsernameKey: []byte("u")}
		}
		env.ApplySecret(t, s)
	}

	t.Run("kube-apiserver stores Secrets whose type is read before decoding", func(t *testing.T) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		for key, want := range map[string]string{"web/shop-tls": "kubernetes.io/tls", "web/password": "Opaque", "web/basic": "kubernetes.io/basic-auth"} {
			resp, err := cli.Get(ctx, env.EtcdPrefix+"/secrets/"+key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("%s: %v", key, err)
			}
			if typ, ok := storedSecretType(resp.Kvs[0].Value); !ok || typ != want {
				t.Errorf("%s: stored type %q, %v; want %q", key, typ, ok, want)
			}
		}
	})

	for _, tc := range []struct {
		namespaces string
		want       []string
	}{
		{"web,shop", []string{"lb/keys", "shop/shop-tls", "web/shop-tls"}},
		// The sidecar's namespace is one of all: its TLS Secrets are read too.
		{"*", []string{"lb/keys", "lb/lb-tls", "other/other-tls", "shop/shop-tls", "web/shop-tls"}},
	} {
		t.Run(tc.namespaces, func(t *testing.T) {
			tlsNS := namespaces(t, tc.namespaces)
			kube := &Kube{Client: env.Client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
				TLSSecretNamespaces: tlsNS, Logger: slog.New(slog.DiscardHandler)}
			runKube(t, kube)
			etcd := runEtcd(t, EtcdConfig{Endpoints: []string{env.EtcdURL}, Prefix: env.EtcdPrefix, TLSSecretNamespaces: tlsNS})
			waitKube := func(what string, ok func(*snapshot.Objects) bool) *snapshot.Objects {
				t.Helper()
				var (
					objs *snapshot.Objects
					err  error
				)
				if haproxytest.Poll(30*time.Second, func() bool {
					c, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					objs, err = kube.Objects(c)
					return err == nil && ok(objs)
				}) != nil {
					t.Fatalf("waited for %s: %v, %v", what, err, secretKeys(objs))
				}
				return objs
			}
			is := func(want []string) func(*snapshot.Objects) bool {
				return func(o *snapshot.Objects) bool { return slices.Equal(secretKeys(o), want) }
			}
			k := waitKube("the TLS Secrets through the API", is(tc.want))
			e := etcd.waitFor("the TLS Secrets in etcd", func(o *snapshot.Objects, err error) bool { return err == nil && is(tc.want)(o) })
			for _, key := range tc.want {
				ns, name, _ := strings.Cut(key, "/")
				ks, es := findSecret(k, ns, name), findSecret(e, ns, name)
				if !bytes.Equal(ks.Data[corev1.TLSCertKey], es.Data[corev1.TLSCertKey]) || ks.Type != es.Type {
					t.Errorf("%s differs: kube %s %q, etcd %s %q", key, ks.Type, ks.Data[corev1.TLSCertKey], es.Type, es.Data[corev1.TLSCertKey])
				}
			}
			if kube.Lookup(snapshot.Ref{Kind: "Secret", Namespace: "web", Name: "shop-tls"}) == nil {
				t.Error("kube: no object for Events on Secret web/shop-tls")
			}

			// Memory: the Secrets of other types are not held, by the informers (the API
			// server filters them) nor by the etcd source (dropped before decoding).
			kube.mu.Lock()
			for _, w := range kube.cur.tls {
				for _, o := range w.informer.GetStore().List() {
					if s := o.(*corev1.Secret); s.Type != corev1.SecretTypeTLS {
						t.Errorf("kube: the informer of %s holds %s/%s of type %s", w.where(), s.Namespace, s.Name, s.Type)
					}
				}
			}
			kube.mu.Unlock()
			etcd.src.mu.Lock()
			placeholders := 0
			for _, w := range etcd.src.tlsWatches {
				for key, it := range w.items {
					if s, ok := it.obj.(*corev1.Secret); ok && s.Type != corev1.SecretTypeTLS {
						t.Errorf("etcd: %s holds a Secret of type %s", key, s.Type)
					}
					if it.obj == nil && it.err == nil {
						placeholders++
					}
				}
			}
			etcd.src.mu.Unlock()
			if placeholders < 2 {
				t.Errorf("etcd: %d Secrets of the TLS Secret namespaces dropped, want web/password and web/basic at least", placeholders)
			}
			if etcd.logs.contains("web/password") {
				t.Error("etcd: logged something about web/password, which it should not even decode")
			}

			// Changes: a certificate rotated, a TLS Secret added, one deleted.
			s := typedSecret("web", "shop-tls", corev1.SecretTypeTLS, "shop 2 "+tc.namespaces)
			env.ApplySecret(t, s)
			env.ApplySecret(t, typedSecret("shop", "new-tls", corev1.SecretTypeTLS, "new"))
			if err := env.Client.CoreV1().Secrets("shop").Delete(ctx, "shop-tls", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			changed := func(o *snapshot.Objects) bool {
				web := findSecret(o, "web", "shop-tls")
				return web != nil && string(web.Data[corev1.TLSCertKey]) == "shop 2 "+tc.namespaces &&
					findSecret(o, "shop", "new-tls") != nil && findSecret(o, "shop", "shop-tls") == nil
			}
			waitKube("the changes through the API", changed)
			etcd.waitFor("the changes in etcd", func(o *snapshot.Objects, err error) bool { return err == nil && changed(o) })
			// Back as they were for the next case.
			if err := env.Client.CoreV1().Secrets("shop").Delete(ctx, "new-tls", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			env.ApplySecret(t, typedSecret("shop", "shop-tls", corev1.SecretTypeTLS, "shop in shop"))
		})
	}

	t.Run("a namespace RBAC forbids is an error naming what to grant", func(t *testing.T) {
		// The user may read the load balancer's ConfigMaps and Secrets, and web's Secrets,
		// not shop's.
		for _, ns := range []string{"lb", "web"} {
			if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tls-reader"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}}}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tls-reader"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tls-reader"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "tls-reader"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "tls-reader"}
		client := kubernetes.NewForConfigOrDie(cfg)
		for _, tc := range []struct{ namespaces, want string }{
			{"web,shop", "Secrets of shop (--tls-secret-namespaces): give the sidecar's service account get, list and watch on secrets through a Role in namespace shop"},
			{"*", "Secrets of every namespace (--tls-secret-namespaces): give the sidecar's service account get, list and watch on secrets through a ClusterRole"},
		} {
			k := &Kube{Client: client, Namespace: "lb", ServicesConfigMap: "services", KeysSecret: "keys",
				TLSSecretNamespaces: namespaces(t, tc.namespaces), Logger: slog.New(slog.DiscardHandler)}
			runKube(t, k)
			c, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err := k.Objects(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want %q", tc.namespaces, err, tc.want)
			}
			if c.Err() != nil {
				t.Errorf("%s: Objects waited until its deadline", tc.namespaces)
			}
			cancel()
		}
	})
}
