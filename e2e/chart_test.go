package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

const chartDir = "../charts/haproxy-sidecar"

// helmTemplate renders the chart as release name in namespace ns with args (--set ...).
func helmTemplate(t *testing.T, helm, name, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return decodeDocs(t, run(t, helm, append([]string{"template", name, chartDir, "--namespace", ns}, args...)...))
}

// find returns the objects of kind (and name, when not "").
func find(objs []*unstructured.Unstructured, kind, name string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			out = append(out, o)
		}
	}
	return out
}

// podSpec is the Deployment's pod template spec.
func podSpec(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := find(objs, "Deployment", "")
	if len(d) != 1 {
		t.Fatalf("%d Deployments", len(d))
	}
	spec, _, _ := unstructured.NestedMap(d[0].Object, "spec", "template", "spec")
	return spec
}

// container is the named container of the pod spec.
func container(t *testing.T, spec map[string]any, name string) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(spec, "containers")
	for _, c := range cs {
		if m := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

// envOf is a container's environment, name -> value (valueFrom: "").
func envOf(c map[string]any) map[string]string {
	env := map[string]string{}
	list, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range list {
		m := e.(map[string]any)
		v, _ := m["value"].(string)
		env[m["name"].(string)] = v
	}
	return env
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChartToggles: each of the chart's toggles adds its objects when on and none when off.
func TestChartToggles(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		toggle string
		on     bool // the default
		kinds  map[string]string
	}{
		{"pdb.enabled", true, map[string]string{"PodDisruptionBudget": "lb"}},
		{"serviceMonitor.enabled", false, map[string]string{"ServiceMonitor": "lb", "Service": "lb-metrics"}},
		{"prometheusRule.enabled", false, map[string]string{"PrometheusRule": "lb"}},
		{"networkPolicy.enabled", false, map[string]string{"NetworkPolicy": "lb"}},
		{"dashboards.enabled", false, map[string]string{"ConfigMap": "lb-dashboard"}},
		{"serviceAccount.create", true, map[string]string{"ServiceAccount": "lb"}},
		{"rbac.clusterWide", false, map[string]string{"ClusterRole": "lb-lb-pods", "ClusterRoleBinding": "lb-lb-pods"}},
		{"webhook.enabled", false, map[string]string{"ValidatingWebhookConfiguration": "lb-lb", "Service": "lb-webhook", "Secret": "lb-webhook-tls"}},
	} {
		t.Run(tc.toggle, func(t *testing.T) {
			for _, v := range []string{"true", "false"} {
				run(t, helm, "lint", "--strict", chartDir, "--set", tc.toggle+"="+v)
			}
			def := helmTemplate(t, helm, "lb", "lb")
			on := helmTemplate(t, helm, "lb", "lb", "--set", tc.toggle+"=true")
			off := helmTemplate(t, helm, "lb", "lb", "--set", tc.toggle+"=false")
			for kind, name := range tc.kinds {
				if len(find(on, kind, name)) != 1 || len(find(off, kind, name)) != 0 {
					t.Errorf("%s %s: %d with %s=true, %d with false; want 1 and 0", kind, name, len(find(on, kind, name)), tc.toggle, len(find(off, kind, name)))
				}
				if got := len(find(def, kind, name)) == 1; got != tc.on {
					t.Errorf("%s %s by default: %v, want %v", kind, name, got, tc.on)
				}
			}
		})
	}

	t.Run("rbac.clusterWide replaces the namespaced pod Roles", func(t *testing.T) {
		objs := helmTemplate(t, helm, "lb", "lb", "--set", "rbac.clusterWide=true")
		for _, r := range find(objs, "Role", "") {
			if strings.Contains(toJSON(t, r.Object), "endpointslices") {
				t.Errorf("Role %s/%s grants EndpointSlices besides the ClusterRole", r.GetNamespace(), r.GetName())
			}
		}
	})
	t.Run("pod Roles in the release's namespace, the services' and rbac.podNamespaces", func(t *testing.T) {
		objs := helmTemplate(t, helm, "lb", "lb", "--set", "services.shop.namespace=shop", "--set", "services.shop.selector.app=shop",
			"--set", "rbac.podNamespaces={web,shop}")
		var got []string
		for _, r := range find(objs, "Role", "lb-lb-pods") {
			js := toJSON(t, r.Object)
			if !strings.Contains(js, `"resources":["pods"]`) || !strings.Contains(js, `"resources":["events"]`) {
				t.Errorf("the pod Role of %s: %s", r.GetNamespace(), js)
			}
			got = append(got, r.GetNamespace())
		}
		if strings.Join(got, ",") != "lb,shop,web" {
			t.Errorf("pod Roles in %v, want lb, shop, web once each", got)
		}
		if len(find(objs, "ClusterRole", "")) != 0 {
			t.Error("a ClusterRole without rbac.clusterWide")
		}
	})
	t.Run("the dashboard ConfigMap", func(t *testing.T) {
		cm := find(helmTemplate(t, helm, "lb", "lb", "--set", "dashboards.enabled=true"), "ConfigMap", "lb-dashboard")[0]
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("labels %v: Grafana's sidecar looks for grafana_dashboard", cm.GetLabels())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		var d struct{ Title string }
		if err := json.Unmarshal([]byte(data["haproxy-sidecar.json"]), &d); err != nil || d.Title == "" {
			t.Errorf("the dashboard is not JSON with a title: %v", err)
		}
	})
	t.Run("the record of what HAProxy runs in memory, beside HAProxy's sockets", func(t *testing.T) {
		js := toJSON(t, podSpec(t, helmTemplate(t, helm, "lb", "lb")))
		for _, want := range []string{`{"emptyDir":{"medium":"Memory"},"name":"run"}`,
			`{"name":"HAPROXY_SIDECAR_RECORD_DIR","value":"/var/run/haproxy/haproxy-sidecar"}`,
			`{"mountPath":"/var/run/haproxy","name":"run"}`} {
			if !strings.Contains(js, want) {
				t.Errorf("the pod spec lacks %s", want)
			}
		}
	})
	t.Run("the runtime API through the stats socket the built-in template declares", func(t *testing.T) {
		js := toJSON(t, podSpec(t, helmTemplate(t, helm, "lb", "lb")))
		for _, want := range []string{`{"name":"HAPROXY_SIDECAR_RUNTIME_SOCKET","value":"/var/run/haproxy/runtime.sock"}`,
			`{"name":"STATS_SOCKET","value":"/var/run/haproxy/runtime.sock"}`} {
			if !strings.Contains(js, want) {
				t.Errorf("the pod spec lacks %s", want)
			}
		}
		if !regexp.MustCompile(`"HAPROXY_SIDECAR_ENV_ALLOW","value":"[^"]*STATS_SOCKET`).MatchString(js) {
			t.Error("the template may not read STATS_SOCKET (--env-allow)")
		}
	})
	t.Run("/etc/haproxy on the node's disk unless configVolume.medium says Memory", func(t *testing.T) {
		want := map[string]string{"": `{"emptyDir":{},"name":"config"}`, "Memory": `{"emptyDir":{"medium":"Memory"},"name":"config"}`}
		for medium, vol := range want {
			if js := toJSON(t, podSpec(t, helmTemplate(t, helm, "lb", "lb", "--set", "configVolume.medium="+medium))); !strings.Contains(js, vol) {
				t.Errorf("configVolume.medium=%q: the pod spec lacks %s", medium, vol)
			}
		}
	})
}

// TestChartWebhook: with webhook.enabled, the sidecar serves the webhook with the certificate
// the API server is told to trust, for the Service's name.
func TestChartWebhook(t *testing.T) {
	helm := helmBin(t)
	objs := helmTemplate(t, helm, "lb", "lb", "--set", "webhook.enabled=true", "--set", "watch={ingresses.v1.networking.k8s.io,nodes.v1}")
	cfg := find(objs, "ValidatingWebhookConfiguration", "lb-lb")[0]
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	if len(hooks) != 2 {
		t.Fatalf("%d webhooks, want the inputs' and the watched resources'", len(hooks))
	}
	if js := toJSON(t, hooks[1]); !strings.Contains(js, `"ingresses"`) || strings.Contains(js, `"nodes"`) {
		t.Errorf("the watched resources' webhook gates %s: want ingresses, not nodes (the cluster writes them)", js)
	}
	caB64, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
	ca, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		t.Fatal(err)
	}
	secret := find(objs, "Secret", "lb-webhook-tls")[0]
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	crtPEM, _ := base64.StdEncoding.DecodeString(data["tls.crt"])
	keyPEM, _ := base64.StdEncoding.DecodeString(data["tls.key"])
	pair, err := tls.X509KeyPair(crtPEM, keyPEM)
	if err != nil {
		t.Fatalf("the Secret's certificate and key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "lb-webhook.lb.svc"}); err != nil {
		t.Errorf("the API server would not trust the webhook's certificate: %v", err)
	}

	sidecar := container(t, podSpec(t, objs), "sidecar")
	env := envOf(sidecar)
	if env["HAPROXY_SIDECAR_WEBHOOK_ADDR"] != ":8443" || env["HAPROXY_SIDECAR_WEBHOOK_CERT_DIR"] != "/var/run/haproxy-sidecar/webhook" {
		t.Errorf("the sidecar's webhook environment: %v", env)
	}
	if js := toJSON(t, podSpec(t, objs)); !strings.Contains(js, `"secretName":"lb-webhook-tls"`) || !strings.Contains(js, `"mountPath":"/var/run/haproxy-sidecar/webhook"`) {
		t.Errorf("the webhook's Secret is not mounted where --webhook-cert-dir says: %s", js)
	}

	t.Run("cert-manager", func(t *testing.T) {
		objs := helmTemplate(t, helm, "lb", "lb", "--set", "webhook.enabled=true,webhook.certManager.enabled=true")
		cfg := find(objs, "ValidatingWebhookConfiguration", "lb-lb")[0]
		if cfg.GetAnnotations()["cert-manager.io/inject-ca-from"] != "lb/lb-webhook" {
			t.Errorf("annotations %v: cert-manager's cainjector needs inject-ca-from", cfg.GetAnnotations())
		}
		if strings.Contains(toJSON(t, cfg.Object), "caBundle") {
			t.Error("a caBundle besides cert-manager's")
		}
		cert := find(objs, "Certificate", "lb-webhook")
		if len(cert) != 1 || len(find(objs, "Secret", "lb-webhook-tls")) != 0 || len(find(objs, "Issuer", "lb-webhook")) != 1 {
			t.Fatal("want a Certificate and its self-signed Issuer, and no Secret of the chart's")
		}
		if js := toJSON(t, cert[0].Object); !strings.Contains(js, `"secretName":"lb-webhook-tls"`) || !strings.Contains(js, `"lb-webhook.lb.svc"`) {
			t.Errorf("the Certificate: %s", js)
		}
		objs = helmTemplate(t, helm, "lb", "lb", "--set", "webhook.enabled=true,webhook.certManager.enabled=true,webhook.certManager.issuerRef.kind=ClusterIssuer,webhook.certManager.issuerRef.name=ca")
		if len(find(objs, "Issuer", "")) != 0 || !strings.Contains(toJSON(t, find(objs, "Certificate", "lb-webhook")[0].Object), `"kind":"ClusterIssuer"`) {
			t.Error("an issuerRef given: the Certificate names it and the chart makes no Issuer")
		}
	})
}

// TestChartValues: the values reach the objects.
func TestChartValues(t *testing.T) {
	helm := helmBin(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`image: {repository: registry.example/haproxy-sidecar, tag: 1.2.3}
imagePullSecrets: [{name: regcred}]
serviceAccount: {create: true, name: lb-sa, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/lb"}}
inputs: {servicesConfigMap: edge-services, configConfigMap: edge-config, certificatesConfigMap: edge-certificates, keysSecret: edge-keys}
services:
  shop: {namespace: lb, selector: {app: shop}}
template: "global\n"
podSecurityContext: {runAsUser: 1000}
sidecar:
  extraArgs: [--min-reload-interval=10s]
  extraEnv: [{name: HTTP_BIND, value: ":8000"}]
  securityContext: {readOnlyRootFilesystem: false}
  extraVolumeMounts: [{name: lua, mountPath: /etc/haproxy-lua}]
haproxy:
  extraVolumeMounts: [{name: lua, mountPath: /etc/haproxy-lua, readOnly: true}]
extraVolumes: [{name: lua, configMap: {name: lua}}]
configVolume: {medium: Memory, sizeLimit: 64Mi}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
priorityClassName: system-cluster-critical
service: {annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}, externalTrafficPolicy: Local}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := helmTemplate(t, helm, "lb", "lb", "-f", values)
	spec := podSpec(t, objs)
	hap, side := container(t, spec, "haproxy"), container(t, spec, "sidecar")
	if hap["image"] != "registry.example/haproxy-sidecar:1.2.3" || side["image"] != hap["image"] {
		t.Errorf("images %v and %v: want both the sidecar's image, the one value", hap["image"], side["image"])
	}
	if args := toJSON(t, side["args"]); args != `["run","--min-reload-interval=10s"]` {
		t.Errorf("sidecar args %s", args)
	}
	env := envOf(side)
	for k, v := range map[string]string{"HAPROXY_SIDECAR_SERVICES_CONFIGMAP": "edge-services", "HAPROXY_SIDECAR_CONFIG_CONFIGMAP": "edge-config",
		"HAPROXY_SIDECAR_CERTIFICATES_CONFIGMAP": "edge-certificates", "HAPROXY_SIDECAR_KEYS_SECRET": "edge-keys", "HTTP_BIND": ":8000"} {
		if env[k] != v {
			t.Errorf("sidecar env %s = %q, want %q", k, env[k], v)
		}
	}
	if len(find(objs, "ConfigMap", "edge-services")) != 1 || len(find(objs, "ConfigMap", "edge-config")) != 1 {
		t.Error("the ConfigMaps are not named after inputs")
	}
	for _, want := range []string{`"imagePullSecrets":[{"name":"regcred"}]`, `"serviceAccountName":"lb-sa"`, `"priorityClassName":"system-cluster-critical"`,
		`"runAsUser":1000`, `"runAsNonRoot":true`, // a key overridden, the others kept
		`{"configMap":{"name":"lua"},"name":"lua"}`, `{"emptyDir":{"medium":"Memory","sizeLimit":"64Mi"},"name":"config"}`, `"labelSelector":{"matchLabels":{"app.kubernetes.io/instance":"lb","app.kubernetes.io/name":"haproxy-sidecar"}}`} {
		if !strings.Contains(toJSON(t, spec), want) {
			t.Errorf("the pod spec lacks %s", want)
		}
	}
	if sc := toJSON(t, side["securityContext"]); !strings.Contains(sc, `"readOnlyRootFilesystem":false`) || !strings.Contains(sc, `"allowPrivilegeEscalation":false`) {
		t.Errorf("sidecar securityContext %s: one key overridden, the others kept", sc)
	}
	if !strings.Contains(toJSON(t, hap["volumeMounts"]), "/etc/haproxy-lua") || !strings.Contains(toJSON(t, side["volumeMounts"]), "/etc/haproxy-lua") {
		t.Error("extra volume mounts missing")
	}
	sa := find(objs, "ServiceAccount", "lb-sa")
	if len(sa) != 1 || sa[0].GetAnnotations()["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("service account lb-sa with its annotation: %v", sa)
	}
	for _, b := range append(find(objs, "RoleBinding", ""), find(objs, "ClusterRoleBinding", "")...) {
		if !strings.Contains(toJSON(t, b.Object), `"name":"lb-sa"`) {
			t.Errorf("%s %s does not bind lb-sa", b.GetKind(), b.GetName())
		}
	}
	svc := find(objs, "Service", "lb")[0]
	if svc.GetAnnotations()["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" || !strings.Contains(toJSON(t, svc.Object), `"externalTrafficPolicy":"Local"`) {
		t.Errorf("service annotations and externalTrafficPolicy: %s", toJSON(t, svc.Object))
	}
}

// TestChartRefusesUnknownValues: the schema knows every key, so a typo is an error, not a value
// silently dropped.
func TestChartRefusesUnknownValues(t *testing.T) {
	helm := helmBin(t)
	for set, key := range map[string]string{"sidecar.nosuch=1": "nosuch", "nosuch=1": "nosuch", "pdb.nosuch=1": "nosuch",
		"service.nosuch=1": "nosuch", "prometheusRule.nosuch=1": "nosuch", "serviceAccount.nosuch=1": "nosuch", "inputs.nosuch=x": "nosuch",
		"sidecar.securityContext.nosuch=1": "nosuch", "haproxy.image.tag=3.2": "'image' not allowed",
		"configVolume.medium=Disk": "configVolume/medium", "configVolume.nosuch=1": "nosuch"} {
		out, err := exec.Command(helm, "template", "lb", chartDir, "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), key) {
			t.Errorf("--set %s: %v\n%s", set, err, out)
		}
	}
	for _, set := range []string{"sidecar.extraArgs[0]=--pprof", "sidecar.extraEnv[0].name=A", "pdb.minAvailable=50%", "serviceMonitor.labels.release=prometheus"} {
		if out, err := exec.Command(helm, "template", "lb", chartDir, "--set", set).CombinedOutput(); err != nil {
			t.Errorf("--set %s refused: %v\n%s", set, err, out)
		}
	}
}

// monitoringCRDs are the Prometheus Operator's two kinds the chart makes, with no schema: enough
// for the API server to take them in a dry run.
const monitoringCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, listKind: ServiceMonitorList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: prometheusrules, singular: prometheusrule, kind: PrometheusRule, listKind: PrometheusRuleList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestChartDryRun: the real API server takes the chart with every toggle on (server-side dry
// run, strict field validation), and two releases in one namespace with their own input names.
func TestChartDryRun(t *testing.T) {
	helm := helmBin(t)
	k := kubetest.Start(t)
	for _, ns := range []string{"lb", "shop", "web"} {
		k.Namespace(t, ns)
	}
	kubectl := func(t *testing.T, args ...string) []byte {
		t.Helper()
		return run(t, k.KubectlPath, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	}
	crds := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(crds, []byte(monitoringCRDs), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", crds)
	kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")

	// dryRun has the API server check objs, each in its namespace (kubectl takes one per call).
	dryRun := func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		byNS := map[string][]byte{}
		for _, o := range objs {
			ns := o.GetNamespace()
			if ns == "" {
				ns = "lb"
			}
			byNS[ns] = append(append(byNS[ns], mustJSON(t, o)...), '\n')
		}
		for ns, docs := range byNS {
			f := filepath.Join(t.TempDir(), ns+".json")
			if err := os.WriteFile(f, docs, 0o600); err != nil {
				t.Fatal(err)
			}
			kubectl(t, "apply", "--dry-run=server", "--validate=strict", "-n", ns, "-f", f)
		}
	}
	all := []string{"--set", "pdb.enabled=true,serviceMonitor.enabled=true,prometheusRule.enabled=true,networkPolicy.enabled=true,dashboards.enabled=true,leaderElection.enabled=true,webhook.enabled=true",
		"--set", "services.shop.namespace=shop,services.shop.selector.app=shop,template=global",
		"--set", "rbac.podNamespaces={web}", "--set", "sidecar.tlsSecretNamespaces={web}", "--set", "watch={nodes.v1}",
		"--set", "sidecar.extraArgs[0]=--pprof", "--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
		"--set", "topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=zone,topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
		"--set", "service.externalTrafficPolicy=Local,service.annotations.a=b,priorityClassName=system-cluster-critical",
		"--set", "configVolume.medium=Memory,configVolume.sizeLimit=64Mi",
		"--set", "image.digest=sha256:" + strings.Repeat("0f", 32) + ",ports.http=8000,ports.haproxyMetrics=18405,nameOverride=proxy",
		"--set-json", `clusters={"name":"east","forgetAfter":"5m","members":[{"name":"west","secret":"west-kubeconfig","context":"west"}]}`}
	t.Run("every toggle on", func(t *testing.T) {
		objs := helmTemplate(t, helm, "lb", "lb", all...)
		for _, kind := range []string{"PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "NetworkPolicy"} {
			if len(find(objs, kind, "")) != 1 {
				t.Errorf("no %s", kind)
			}
		}
		dryRun(t, objs)
	})
	t.Run("every toggle off", func(t *testing.T) {
		dryRun(t, helmTemplate(t, helm, "lb", "lb", "--set", "pdb.enabled=false,serviceAccount.create=false,serviceAccount.name=default"))
	})
	t.Run("cluster-wide", func(t *testing.T) {
		dryRun(t, helmTemplate(t, helm, "lb", "lb", "--set", "rbac.clusterWide=true,sidecar.tlsSecretNamespaces={*}"))
	})
	t.Run("the namespaced grants are enough and no more", func(t *testing.T) {
		var rbac []*unstructured.Unstructured
		for _, o := range helmTemplate(t, helm, "lb", "lb", "--set", "services.shop.namespace=shop,services.shop.selector.app=shop") {
			if strings.HasPrefix(o.GetAPIVersion(), "rbac.") || o.GetKind() == "ServiceAccount" {
				rbac = append(rbac, o)
			}
		}
		var docs []byte
		for _, o := range rbac {
			docs = append(append(docs, mustJSON(t, o)...), '\n')
		}
		kubectlApplyByNamespace(t, k, "lb", docs)
		for _, tc := range []struct {
			verb, resource, ns, want string
		}{
			{"list", "pods", "shop", "yes"}, {"watch", "endpointslices.discovery.k8s.io", "shop", "yes"}, {"create", "events", "shop", "yes"},
			{"list", "pods", "lb", "yes"}, {"watch", "configmaps", "lb", "yes"}, {"patch", "events", "lb", "yes"},
			{"list", "pods", "web", "no"}, {"list", "secrets", "shop", "no"}, {"create", "events.events.k8s.io", "lb", "no"},
		} {
			out, _ := exec.Command(k.KubectlPath, "--kubeconfig", k.Kubeconfig, "auth", "can-i", tc.verb, tc.resource, "-n", tc.ns,
				"--as", "system:serviceaccount:lb:lb").Output()
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("can %s %s in %s: %q, want %q", tc.verb, tc.resource, tc.ns, got, tc.want)
			}
		}
	})
	t.Run("two releases in one namespace", func(t *testing.T) {
		// By default: their inputs, Leases and dashboards are their own (TestChartNames).
		both := []string{"--set", "services.shop.namespace=shop,services.shop.selector.app=shop,template=global",
			"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboards.enabled=true,leaderElection.enabled=true,webhook.enabled=true"}
		a := helmTemplate(t, helm, "a", "lb", both...)
		b := helmTemplate(t, helm, "b", "lb", both...)
		seen := map[string]bool{}
		for _, o := range append(a, b...) {
			ns := o.GetNamespace()
			if ns == "" {
				ns = "lb"
			}
			id := o.GetKind() + " " + ns + "/" + o.GetName()
			if seen[id] {
				t.Errorf("both releases make %s", id)
			}
			seen[id] = true
		}
		dryRun(t, append(a, b...))
	})
}

// TestChartAndExamplesUseTheEnvironmentTwins: the sidecar containers of the chart and of
// examples/kubernetes set flags through their HAPROXY_SIDECAR_ twins only (or a name the
// sidecar keeps: STATISTICS_PASSWORD), never an unprefixed twin, never a twin of no flag.
func TestChartAndExamplesUseTheEnvironmentTwins(t *testing.T) {
	twins, old := map[string]bool{}, map[string]bool{}
	for _, cmd := range []string{"run", "render"} {
		for _, n := range config.Names(cmd) {
			for _, e := range config.EnvNames(n) {
				twins[e] = true
			}
			old[strings.TrimPrefix(config.EnvName(n), config.EnvPrefix)] = true
		}
	}
	check := func(t *testing.T, what string, objs []*unstructured.Unstructured) {
		t.Helper()
		env := envOf(container(t, podSpec(t, objs), "sidecar"))
		if len(env) < 5 {
			t.Fatalf("%s: the sidecar's environment %v", what, env)
		}
		for name := range env {
			switch {
			case twins[name]:
			case old[name]:
				t.Errorf("%s sets %s, the deprecated twin of %s%s", what, name, config.EnvPrefix, name)
			case strings.HasPrefix(name, config.EnvPrefix):
				t.Errorf("%s sets %s, the twin of no flag", what, name)
			}
		}
	}
	b, err := os.ReadFile("../examples/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "examples/kubernetes/deployment.yaml", decodeDocs(t, b))
	helm := helmBin(t)
	check(t, "the chart", helmTemplate(t, helm, "lb", "lb", "--set", "leaderElection.enabled=true,peers.enabled=true,sidecar.envAllow=A,sidecar.configSecret=c",
		"--set", "watch={nodes.v1},sidecar.tlsSecretNamespaces={web}", "--set-json", `clusters={"forgetAfter":"5m","members":[{"name":"west","secret":"w"}]}`))
}

// TestManifestsRBACGrantsTheEventsTheCodeWrites: status/events.go records core v1 Events
// (client.CoreV1().Events), on the load balancer's objects and on pods; examples/kubernetes
// grants exactly that API group.
func TestManifestsRBACGrantsTheEventsTheCodeWrites(t *testing.T) {
	src, err := os.ReadFile("../report/status/events.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "client.CoreV1().Events(") {
		t.Fatal("status/events.go no longer writes core v1 Events: change the RBAC of the chart and examples/kubernetes with it")
	}
	b, err := os.ReadFile("../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeDocs(t, b) {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		js := toJSON(t, o.Object)
		if strings.Contains(js, "events.k8s.io") {
			t.Errorf("%s %s grants events.k8s.io, which the sidecar does not write", o.GetKind(), o.GetName())
		}
		if !strings.Contains(js, `{"apiGroups":[""],"resources":["events"],"verbs":["create","patch"]}`) {
			t.Errorf("%s %s does not grant creating and patching core Events: %s", o.GetKind(), o.GetName(), js)
		}
	}
}

// TestChartPeers: peers.enabled has the sidecar follow this Deployment's pods (its selector
// labels, in the release's namespace, which the pod Role there grants), the pod expose the peers
// port, and the NetworkPolicy let the replicas reach it; off, none of it.
func TestChartPeers(t *testing.T) {
	helm := helmBin(t)
	run(t, helm, "lint", "--strict", chartDir, "--set", "peers.enabled=true,peers.port=10500")
	objs := helmTemplate(t, helm, "lb", "edge", "--set", "peers.enabled=true,peers.port=10500,networkPolicy.enabled=true")
	spec := podSpec(t, objs)
	env := envOf(container(t, spec, "sidecar"))
	labels, _, _ := unstructured.NestedStringMap(find(objs, "Deployment", "")[0].Object, "spec", "template", "metadata", "labels")
	var want []string
	for _, k := range []string{"app.kubernetes.io/instance", "app.kubernetes.io/name"} {
		want = append(want, k+"="+labels[k])
	}
	if got := env["HAPROXY_SIDECAR_PEERS_SELECTOR"]; got != strings.Join(want, ",") || labels["app.kubernetes.io/instance"] != "lb" {
		t.Errorf("peers selector %q, want the pod template's selector labels %q", got, strings.Join(want, ","))
	}
	if env["HAPROXY_SIDECAR_PEERS"] != "true" || env["HAPROXY_SIDECAR_PEERS_NAMESPACE"] != "edge" || env["HAPROXY_SIDECAR_PEERS_PORT"] != "10500" {
		t.Errorf("peers environment: %v", env)
	}
	if _, ok := env["HAPROXY_SIDECAR_POD_NAME"]; !ok {
		t.Error("no HAPROXY_SIDECAR_POD_NAME: the local peer is named after the pod")
	}
	if js := toJSON(t, container(t, spec, "haproxy")["ports"]); !strings.Contains(js, `{"containerPort":10500,"name":"peers"}`) {
		t.Errorf("HAProxy's ports %s: no peers port", js)
	}
	if js := toJSON(t, find(objs, "NetworkPolicy", "lb")[0].Object); !strings.Contains(js, `"port":"peers"`) || !strings.Contains(js, `"podSelector":{"matchLabels":{"app.kubernetes.io/instance":"lb"`) {
		t.Errorf("the NetworkPolicy does not open the peers port to the replicas: %s", js)
	}
	roles := find(objs, "Role", "lb-edge-pods")
	if len(roles) != 1 || roles[0].GetNamespace() != "edge" || !strings.Contains(toJSON(t, roles[0].Object), `"resources":["pods"]`) {
		t.Errorf("no Role granting pods in the release's namespace: %v", roles)
	}
	off := helmTemplate(t, helm, "lb", "edge", "--set", "networkPolicy.enabled=true")
	if js := toJSON(t, off); strings.Contains(js, "PEERS") || strings.Contains(js, `"peers"`) {
		t.Error("peers set up with peers.enabled off")
	}
	if out, err := exec.Command(helm, "template", "lb", chartDir, "--set", "peers.enabled=true,peers.port=8080,ports.http=8080").CombinedOutput(); err == nil || !strings.Contains(string(out), "must differ") {
		t.Errorf("peers.port equal to the HTTP port: %v %s", err, out)
	}
}
