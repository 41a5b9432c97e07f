package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

// TestAServiceInAForbiddenNamespaceFreezesNothing: a services key naming a namespace whose pods
// the sidecar may not list (RBAC) is reported on its key and served without servers; every
// other change keeps going live; once the grant is there, its pods are served.
func TestAServiceInAForbiddenNamespaceFreezesNothing(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	k.Namespace(t, "shop")
	const sa = "system:serviceaccount:lb:sidecar"
	grant(t, k, "lb", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})
	pods := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}
	grant(t, k, "demo", sa, pods...)

	e.startSidecar(t, "--source=kube", "--kubeconfig", impersonating(t, k, sa), "--namespace", "lb")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	k.ApplyPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-1", Namespace: "shop", Labels: map[string]string{"app": "shop"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "demo-backend"}}},
	})
	k.SetPodReady(t, "shop", "shop-1", "127.0.0.22", true)
	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["shop"] = fmt.Sprintf(`{"namespace": "shop", "selector": {"app": "shop"}, "hostnames": ["shop.localhost"], "ports": [%d]}`, e.port)
	cm.Data["web"] = strings.Replace(cm.Data["web"], `"web.localhost"`, `"web.localhost", "www.localhost"`, 1)
	k.ApplyConfigMap(t, cm)

	e.waitServed(t, "www.localhost", "/", "web-") // the other change goes live
	var r readyz
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, r = e.readyz(t)
		for _, h := range r.Held {
			if strings.Contains(h.Object, `key "shop"`) && strings.Contains(h.Reason, "the pods of namespace shop cannot be read") {
				return true
			}
		}
		return false
	}, "the shop service reported on its key")
	if code, _ := e.readyz(t); code != 200 {
		t.Errorf("/readyz %d", code)
	}

	grant(t, k, "shop", sa, pods...)
	e.waitServed(t, "shop.localhost", "/", "api-2") // 127.0.0.22 answers as api-2
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, r = e.readyz(t)
		return len(r.Held) == 0
	}, "nothing held once the pods can be read")
}

// grant gives user the rules in namespace ns.
func grant(t *testing.T, k *kubetest.Env, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "sidecar-test"
	if _, err := k.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := k.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// impersonating writes a kubeconfig of the control plane's that acts as user.
func impersonating(t *testing.T, k *kubetest.Env, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
