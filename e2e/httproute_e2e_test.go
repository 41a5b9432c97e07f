package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// kubectlApply applies manifests with kubectl (server-side), retrying for a while: a custom
// resource's kind is served a moment after its CRD is established.
func kubectlApply(t *testing.T, k *kubetest.Env, cacheDir, manifests string) {
	t.Helper()
	var out []byte
	err := haproxytest.Poll(30*time.Second, func() bool {
		cmd := exec.Command(k.KubectlPath, "--kubeconfig", k.Kubeconfig, "--cache-dir", cacheDir,
			"apply", "--server-side", "--force-conflicts", "-f", "-")
		cmd.Stdin = strings.NewReader(manifests)
		var err error
		out, err = cmd.CombinedOutput()
		return err == nil
	})
	if err != nil {
		t.Fatalf("kubectl apply: %s", out)
	}
}

// getWith sends GET http://addr+path for host with the headers given (name, value, ...),
// without following redirects: the status, the body and the response's headers.
func (e *demoEnv) getWith(addr, host, path string, headers ...string) (int, string, http.Header, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return 0, "", nil, err
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

// getTLSSNI sends GET https://addr+path with SNI sni and Host host: the status and the body.
func getTLSSNI(addr, sni, host, path string) (int, string, error) {
	req, err := http.NewRequest("GET", "https://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{ServerName: sni, InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// installGatewayAPI installs the Gateway API CRDs (testdata/gateway-api) and waits until
// GatewayClasses, Gateways, HTTPRoutes and ReferenceGrants are served.
func installGatewayAPI(t *testing.T, k *kubetest.Env, cacheDir string) {
	t.Helper()
	run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "--cache-dir", cacheDir, "apply", "--server-side", "-f", "testdata/gateway-api")
	run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "--cache-dir", cacheDir, "wait", "--for", "condition=Established", "--timeout", "60s",
		"crd/gatewayclasses.gateway.networking.k8s.io", "crd/gateways.gateway.networking.k8s.io",
		"crd/httproutes.gateway.networking.k8s.io", "crd/referencegrants.gateway.networking.k8s.io")
}

// applyGatewayExample readies k for the Gateway API example (a template set of
// examples/templates): the CRDs, namespaces lb and web, an empty services ConfigMap and the
// config ConfigMap of example. It returns kubectl's cache directory, for kubectlApply.
func applyGatewayExample(t *testing.T, k *kubetest.Env, example string) (cacheDir string) {
	t.Helper()
	cacheDir = t.TempDir()
	installGatewayAPI(t, k, cacheDir)
	k.Namespace(t, "lb")
	k.Namespace(t, "web")
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}})
	k.ApplyConfigMap(t, exampleConfigMap(t, example))
	return cacheDir
}

// unadmittingGateways are two Gateways that a route of namespace web may name but not attach
// to: lb/same-namespace is of the class, but its listener admits routes of its own namespace
// only (the default); lb/other is of another class.
const unadmittingGateways = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace, namespace: lb}
spec:
  gatewayClassName: haproxy-sidecar
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other, namespace: lb}
spec:
  gatewayClassName: other
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
`

// gatewayClass is the example's GatewayClass, whose controllerName is the sidecar's.
const gatewayClass = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: haproxy-sidecar}
spec: {controllerName: haproxy-sidecar.io/controller}
`

// gatewayObjects are the GatewayClass, Gateways and HTTPRoutes of TestHTTPRouteExample;
// shopRules are web/shop's rules.
func gatewayObjects(shopRules string) string {
	return gatewayClass + `---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: haproxy, namespace: lb}
spec:
  gatewayClassName: haproxy-sidecar
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
  - name: https
    protocol: HTTPS
    port: 443
    allowedRoutes: {namespaces: {from: All}}
    tls: {mode: Terminate, certificateRefs: [{kind: Secret, name: gw-tls}, {kind: Secret, name: web-tls, namespace: web}]}
  - {name: isolated, protocol: HTTP, port: 80, hostname: isolated.example.org, allowedRoutes: {namespaces: {from: All}}}
  - name: secure
    protocol: HTTPS
    port: 443
    hostname: secure.example.org
    allowedRoutes: {namespaces: {from: All}}
    tls: {mode: Terminate, certificateRefs: [{kind: Secret, name: gw-tls}]}
---
` + unadmittingGateways + `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb}]
  hostnames: [shop.example.com]
  rules:
` + shopRules + `
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wild, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb, sectionName: http}]
  hostnames: ["*.example.org"]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: isolated, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb, sectionName: isolated}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /only}}]
    backendRefs: [{name: api, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: filters, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb, sectionName: http}]
  hostnames: [filters.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: shop.example.com, statusCode: 301, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]
  - matches: [{path: {type: PathPrefix, value: /rewrite}}]
    filters:
    - {type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /inside}}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: X-Route, value: filters}]}}
    backendRefs: [{name: api, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /gone}}]
    backendRefs: [{name: missing, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: api, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unattached, namespace: web}
spec:
  parentRefs: [{name: other, namespace: lb}, {name: same-namespace, namespace: lb}]
  hostnames: [unattached.example.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
`
}

const shopRules = `  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{path: {type: Exact, value: /checkout}}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: web, port: 80, weight: 3}, {name: api, port: 8080, weight: 1}]
  - matches: [{path: {type: PathPrefix, value: /admin}, headers: [{name: x-admin, value: "1"}]}]
    backendRefs: [{name: api, port: 8080}]`

// TestHTTPRouteExample runs examples/templates/httproute.yaml against a real kube-apiserver
// with the Gateway API CRDs (testdata/gateway-api) and a real HAProxy: HTTPRoutes attached to
// a Gateway of the class route by hostname (precise and wildcard), path (PathPrefix, Exact)
// and header to real backends, split by the backendRefs' weights; redirects, rewrites and
// response headers are served, a backendRef that does not resolve answers 500; routes of other Gateways,
// or not admitted, are not served; weights and a path edited go live with no reload; the same
// objects render the same bytes from the API, from etcd and from files (the example's own
// tests pass on them).
func TestHTTPRouteExample(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	const example = "../examples/templates/httproute.yaml"
	cacheDir := applyGatewayExample(t, k, example)
	// The TLS Secret the Gateway names, in its namespace (lb), unlabelled: certificate
	// lb.gw-tls with --tls-secret-namespaces lb. The one of web it names is not served (no
	// ReferenceGrant of web allows it).
	gwCert, gwKey := testcert.Pair(t, "shop.example.com")
	k.ApplySecret(t, nsTLSSecret("lb", "gw-tls", gwCert, gwKey))
	applyService(t, k, service("web", "http", 80, e.port))
	applyService(t, k, service("api", "", 8080, e.port))
	putEndpointSlice(t, k, endpointSlice("web", "http", e.port, map[string]bool{"127.0.0.11": true, "127.0.0.12": true}))
	putEndpointSlice(t, k, endpointSlice("api", "", e.port, map[string]bool{"127.0.0.21": true}))
	kubectlApply(t, k, cacheDir, gatewayObjects(shopRules))

	watch := exampleWatchFlags(t, example)
	tlsFlag := exampleFlag(t, example, "tls-secret-namespaces")
	e.startSidecar(t, append(append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms"}, watch...), tlsFlag...)...)
	p := e.startHAProxy(t)
	e.waitReady(t)

	waitRoutes(t, e,
		route{"shop.example.com/api", "api-1"},
		route{"shop.example.com/api/v1/x", "api-1"},
		route{"shop.example.com/checkout", "api-1"},
		route{"a.example.org/", "web-"},    // wildcard
		route{"a.b.example.org/x", "web-"}, // a wildcard is a suffix
		route{"example.org/", "404"},
		// Listener isolation: isolated.example.org is the listener isolated's, whose route
		// serves /only; web/wild (*.example.org, on listener http) does not serve it.
		route{"isolated.example.org/only", "api-1"},
		route{"isolated.example.org/", "404"},
		route{"unattached.example.com/", "404"}, // another class; a listener that does not admit it
		route{"other.example.com/", "404"},
	)
	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// web weighs 3, api 1: each of web's two servers gets 3/2, api's one server 1, scaled to 256.
	for _, want := range []string{
		"backend be_web_api_8080_web_80\n",
		fmt.Sprintf("server web-web-1-%d 127.0.0.11:%d weight 256\n", e.port, e.port),
		fmt.Sprintf("server web-127.0.0.12-%d 127.0.0.12:%d weight 256\n", e.port, e.port),
		fmt.Sprintf("server api-api-1-%d 127.0.0.21:%d weight 171\n", e.port, e.port),
		"{ req.hdr(x-admin) -m str \"1\" }",
		`listener=https attached=1 kinds="HTTPRoute" resolved=false resolved.reason=RefNotPermitted resolved.message="certificateRef \"web/web-tls\": another namespace`,
		"/lb.gw-tls.pem alpn",
	} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("haproxy.cfg has no %q:\n%s", want, cfg)
		}
	}
	// shares answers to n requests for host/path by backend (web-1 and web-2 count as web-).
	shares := func(n int, host, path string) map[string]int {
		seen := map[string]int{}
		for range n {
			code, body, _, err := e.get(host, path)
			switch {
			case err != nil || code != 200:
				seen[fmt.Sprintf("%d %v", code, err)]++
			case strings.HasPrefix(body, "web-"):
				seen["web"]++
			default:
				seen[strings.Fields(body)[0]]++
			}
		}
		return seen
	}
	// Loosely: weighted round robin gives api 1 request in 4; anything from 1 in 10 to 1 in 2.
	if got := shares(40, "shop.example.com", "/cart"); len(got) != 2 || got["api-1"] < 4 || got["api-1"] > 20 {
		t.Errorf("40 requests to shop.example.com/cart went to %v, want web about 3 in 4 and api-1 the rest", got)
	}
	if cn, err := testcert.ServedCN(os.Getenv("HTTPS_BIND"), "shop.example.com"); err != nil || cn != "shop.example.com" {
		t.Errorf("HTTPS: served CN %q (%v), want the Gateway's certificate shop.example.com", cn, err)
	}
	if code, body, err := getTLS(os.Getenv("HTTPS_BIND"), "shop.example.com", "/checkout"); err != nil || code != 200 || !strings.HasPrefix(body, "api-1") {
		t.Errorf("https://shop.example.com/checkout: %d %q %v, want api-1", code, body, err)
	}
	// Misdirected: the SNI picks listener https, the Host listener secure: 421; the same Host
	// with its own SNI is the listener secure's (no route there: 404).
	if code, _, err := getTLSSNI(os.Getenv("HTTPS_BIND"), "shop.example.com", "secure.example.org", "/checkout"); err != nil || code != 421 {
		t.Errorf("https://secure.example.org/checkout with SNI shop.example.com: %d %v, want 421", code, err)
	}
	if code, _, err := getTLSSNI(os.Getenv("HTTPS_BIND"), "secure.example.org", "secure.example.org", "/checkout"); err != nil || code != 404 {
		t.Errorf("https://secure.example.org/checkout: %d %v, want 404", code, err)
	}
	// A header match: /admin with x-admin: 1 goes to api; without, to / (mostly web).
	if code, body, _, err := e.getWith(e.httpAddr, "shop.example.com", "/admin/x", "x-admin", "1"); err != nil || code != 200 || !strings.HasPrefix(body, "api-1") {
		t.Errorf("shop.example.com/admin/x with x-admin: 1: %d %q %v, want api-1", code, body, err)
	}

	// Filters: a redirect (host, path prefix replaced, the query kept; the listener's port 80
	// left out), a path rewritten with a response header set, and a rule whose backendRef does
	// not resolve answering 500; a path no rule matches: 404.
	if code, _, h, err := e.getWith(e.httpAddr, "filters.example.com", "/old/x?q=1"); err != nil || code != 301 || h.Get("Location") != "http://shop.example.com/new/x?q=1" {
		t.Errorf("filters.example.com/old/x?q=1: %d Location %q %v, want 301 to http://shop.example.com/new/x?q=1", code, h.Get("Location"), err)
	}
	if code, body, h, err := e.getWith(e.httpAddr, "filters.example.com", "/rewrite/a"); err != nil || code != 200 || body != "api-1 /inside/a\n" || h.Get("X-Route") != "filters" {
		t.Errorf("filters.example.com/rewrite/a: %d %q X-Route %q %v, want api-1 /inside/a with X-Route: filters", code, body, h.Get("X-Route"), err)
	}
	// The prefix replaced by /: /strip/b is /b, /strip itself is /.
	for path, want := range map[string]string{"/strip/b": "api-1 /b\n", "/strip": "api-1 /\n"} {
		if code, body, _, err := e.getWith(e.httpAddr, "filters.example.com", path); err != nil || code != 200 || body != want {
			t.Errorf("filters.example.com%s: %d %q %v, want %q", path, code, body, err, want)
		}
	}
	if code, _, _, err := e.getWith(e.httpAddr, "filters.example.com", "/gone"); err != nil || code != 500 {
		t.Errorf("filters.example.com/gone (backendRef to a missing Service): %d %v, want 500", code, err)
	}
	if code, _, _, err := e.getWith(e.httpAddr, "filters.example.com", "/elsewhere"); err != nil || code != 404 {
		t.Errorf("filters.example.com/elsewhere: %d %v, want 404", code, err)
	}

	e.settled(t)
	before := reloadCount(t, p)

	t.Run("weights changed: servers' weights, no reload", func(t *testing.T) {
		kubectlApply(t, k, cacheDir, gatewayObjects(strings.Replace(shopRules, "weight: 3", "weight: 1", 1)))
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			b, _ := os.ReadFile(e.cfgPath)
			return bytes.Contains(b, []byte(fmt.Sprintf("server api-api-1-%d 127.0.0.21:%d weight 256\n", e.port, e.port))) &&
				bytes.Contains(b, []byte(fmt.Sprintf("server web-web-1-%d 127.0.0.11:%d weight 128\n", e.port, e.port)))
		}, "api-1 weighs 256 and the web servers 128")
		e.settled(t)
		out, err := p.Command("@1 show servers state be_web_api_8080_web_80")
		if err != nil {
			t.Fatal(err)
		}
		// show servers state: be_name is field 2, srv_name field 4, srv_uweight (the weight in
		// effect) field 8.
		weights := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 8 && f[1] == "be_web_api_8080_web_80" {
				weights[f[3]] = f[7]
			}
		}
		if w := weights[fmt.Sprintf("api-api-1-%d", e.port)]; w != "256" {
			t.Errorf("HAProxy runs api-1 with weight %q, want 256 (%v)", w, weights)
		}
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for weights, want none", n)
		}
	})

	t.Run("a path edited and a match added for existing backends: map updates, no reload", func(t *testing.T) {
		before := reloadCount(t, p)
		objs := gatewayObjects(strings.Replace(strings.Replace(shopRules, "weight: 3", "weight: 1", 1), "value: /api}", "value: /store}", 1))
		objs = strings.Replace(objs, `  rules:
  - backendRefs: [{name: web, port: 80}]`, `  rules:
  - backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: api, port: 8080}]`, 1) // web/wild
		kubectlApply(t, k, cacheDir, objs)
		waitRoutes(t, e, route{"a.example.org/api/x", "api-1"}, route{"a.example.org/apis", "web-"})
		e.settled(t)
		if m, _ := os.ReadFile(filepath.Join(filepath.Dir(e.cfgPath), "maps", "routes.map")); !bytes.Contains(m, []byte("fe_80@shop.example.com/store/ be_web_api_8080\n")) {
			t.Errorf("routes.map on disk:\n%s", m)
		}
		if n := reloadCount(t, p) - before; n != 0 {
			t.Errorf("%d reloads for a path edited, want none (a map update)", n)
		}
	})

	t.Run("the same from etcd and from files", func(t *testing.T) {
		gets := [][]string{
			{"configmaps", "-n", "lb"},
			{"secrets", "-n", "lb"},
			{"gatewayclasses.v1.gateway.networking.k8s.io"},
			{"gateways.v1.gateway.networking.k8s.io", "-A"},
			{"httproutes.v1.gateway.networking.k8s.io", "-A"},
			{"referencegrants.v1beta1.gateway.networking.k8s.io", "-A"},
			{"namespaces"},
			{"services.v1.", "-A"},
			{"endpointslices.v1.discovery.k8s.io", "-A"},
		}
		r := renderSources(t, k, gets, append(slices.Clone(watch), tlsFlag...)...)
		if m := r["kube"]["maps/routes.map"]; !strings.Contains(m, "fe_80@shop.example.com/store/ be_web_api_8080\n") || !strings.Contains(m, "fe_80@*.example.org/ be_web_web_80\n") {
			t.Errorf("routes.map:\n%s", m)
		}
		if r["kube"]["certs/lb.gw-tls.pem"] == "" {
			t.Errorf("no certificate lb.gw-tls: %v", slices.Collect(maps.Keys(r["kube"])))
		}
		// The TLS Secrets of every namespace: the same (web has none).
		allGets := slices.Clone(gets)
		allGets[1] = []string{"secrets", "-A"}
		all := renderSources(t, k, allGets, append(slices.Clone(watch), "--tls-secret-namespaces", "*")...)
		outDir := regexp.MustCompile(`\S*/out/`) // each rendering has its own
		if a, b := outDir.ReplaceAllString(all["kube"]["haproxy.cfg"], "OUT/"), outDir.ReplaceAllString(r["kube"]["haproxy.cfg"], "OUT/"); a != b {
			t.Errorf("rendered with --tls-secret-namespaces '*':\n%s\nwith %v:\n%s", a, tlsFlag, b)
		}
	})
}
