package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

const nginxExample = "../examples/templates/ingress-nginx.yaml"

// TestIngressNginxExampleTests runs the tests in the config of the ingress-nginx example
// (tests.NAME.yaml, one per annotation at least) with `validate`, against the HAProxy
// installed (CI runs it against each version); and checks that a failing one fails validate,
// so that they are run, not skipped.
func TestIngressNginxExampleTests(t *testing.T) {
	bin := haproxytest.Binary(t)
	flags := append(exampleWatchFlags(t, nginxExample), exampleFlag(t, nginxExample, "tls-secret-namespaces")...)
	example, err := os.ReadFile(nginxExample)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(example), "\n  tests."); n < 17 {
		t.Errorf("%d tests in the config, want one per annotation group (17)", n)
	}
	validate := func(text string) error {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return renderOnce(append([]string{"--source=file", "--dir", dir, "--namespace", "lb", "--haproxy-bin", bin}, flags...), true)
	}
	if err := validate(string(example)); err != nil {
		t.Fatalf("validate: %v", err)
	}
	broken := strings.Replace(string(example), "code 308 if !{ ssl_fc }'", "code 301 if !{ ssl_fc }'", 1)
	if broken == string(example) {
		t.Fatal("no ssl-redirect assertion to break")
	}
	if err := validate(broken); err == nil || !strings.Contains(err.Error(), "force-ssl-redirect") {
		t.Errorf("validate with a failing test: %v, want the test force-ssl-redirect named", err)
	}
}

// nginxIngress is an Ingress of namespace web and class nginx, with annotations (their names
// without nginx.ingress.kubernetes.io/), one rule for host and one path to svc.
func nginxIngress(name, host string, ann map[string]string, pathType networkingv1.PathType, path, svc string, port any) *networkingv1.Ingress {
	a := map[string]string{}
	for k, v := range ann {
		a["nginx.ingress.kubernetes.io/"+k] = v
	}
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web", Annotations: a},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptrTo("nginx"),
			Rules:            []networkingv1.IngressRule{ingressRule(host, ingressPath(pathType, path, svc, port))},
		},
	}
}

// answer is what HAProxy answered one request.
type answer struct {
	code   int
	body   string
	header http.Header
}

// nginxRequest is one request: method, URL path on HTTP (or HTTPS with tls), Host, headers,
// body. Redirects are not followed.
type nginxRequest struct {
	method, host, path string
	header             map[string]string
	body               string
	tls                bool
}

func (r nginxRequest) do(e *demoEnv) (answer, error) {
	scheme, addr := "http", e.httpAddr
	if r.tls {
		scheme, addr = "https", os.Getenv("HTTPS_BIND")
	}
	method := r.method
	if method == "" {
		method = "GET"
	}
	req, err := http.NewRequest(method, scheme+"://"+addr+r.path, strings.NewReader(r.body))
	if err != nil {
		return answer{}, err
	}
	req.Host = r.host
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	c := &http.Client{
		Timeout:       3 * time.Second,
		Transport:     &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{ServerName: r.host, InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}, nil
}

// nginxCase is a request and what its answer must be (ok says what is wrong, "" when right).
type nginxCase struct {
	name string
	req  nginxRequest
	ok   func(answer) string
}

// status is a check of the status code and the start of the body.
func status(code int, bodyPrefix string) func(answer) string {
	return func(a answer) string {
		if a.code != code || !strings.HasPrefix(a.body, bodyPrefix) {
			return fmt.Sprintf("%d %q, want %d %q", a.code, a.body, code, bodyPrefix)
		}
		return ""
	}
}

// redirect is a check of a redirect's code and Location.
func redirect(code int, location string) func(answer) string {
	return func(a answer) string {
		if a.code != code || a.header.Get("Location") != location {
			return fmt.Sprintf("%d Location %q, want %d %q", a.code, a.header.Get("Location"), code, location)
		}
		return ""
	}
}

// waitNginxCases waits until every case is answered as it must; it names those that are not.
func waitNginxCases(t *testing.T, e *demoEnv, cases ...nginxCase) {
	t.Helper()
	var wrong []string
	err := haproxytest.Poll(20*time.Second, func() bool {
		wrong = wrong[:0]
		for _, c := range cases {
			a, err := c.req.do(e)
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: %v", c.name, err))
			} else if why := c.ok(a); why != "" {
				wrong = append(wrong, c.name+": "+why)
			}
		}
		return len(wrong) == 0
	})
	if err != nil {
		cfg, _ := os.ReadFile(e.cfgPath)
		t.Fatalf("not answered as ingress-nginx would:\n%s\nhaproxy.cfg:\n%s", strings.Join(wrong, "\n"), cfg)
	}
}

// TestIngressNginxExample runs examples/templates/ingress-nginx.yaml against a real
// kube-apiserver and HAProxy: Ingresses of class nginx with ingress-nginx's annotations are
// answered as ingress-nginx answers them (rewrite-target with capture groups, use-regex,
// ssl-redirect and force-ssl-redirect, allowlists, canary by header, cookie and weight,
// permanent and temporal redirects, cookie affinity, CORS preflight, body size, app-root,
// backend-protocol HTTPS and GRPC, limit-rpm, limit-connections, proxy-read-timeout), an
// Ingress with a snippet or auth-url answers 503, and the annotations not supported are Warning
// Events on their Ingresses.
func TestIngressNginxExample(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	ctx := context.Background()

	k.Namespace(t, "lb")
	k.Namespace(t, "web")
	k.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}})
	k.ApplyConfigMap(t, exampleConfigMap(t, nginxExample))
	cert, key := testcert.Pair(t, "shop.example.com")
	k.ApplySecret(t, nsTLSSecret("web", "shop-tls", cert, key))
	applyService(t, k, service("web", "http", 80, e.port))
	applyService(t, k, service("api", "", 8080, e.port))
	putEndpointSlice(t, k, endpointSlice("web", "http", e.port, map[string]bool{"127.0.0.11": true, "127.0.0.12": true}))
	putEndpointSlice(t, k, endpointSlice("api", "", e.port, map[string]bool{"127.0.0.21": true}))

	// Backends of their own: TLS (backend-protocol HTTPS), HTTP/2 in clear (GRPC), and one
	// that holds each request until the test releases it (limit-connections, timeouts).
	tlsPort := serveBackend(t, "127.0.0.31", func(s *http.Server) {}, true)
	h2cPort := serveBackend(t, "127.0.0.32", func(s *http.Server) {
		s.Protocols = new(http.Protocols)
		s.Protocols.SetHTTP1(true)
		s.Protocols.SetUnencryptedHTTP2(true)
	}, false)
	held := &holdingBackend{arrived: make(chan struct{}, 10), release: make(chan struct{})}
	heldPort := serveBackendHandler(t, "127.0.0.33", held)
	for name, be := range map[string]struct {
		addr string
		port int
	}{"secure": {"127.0.0.31", tlsPort}, "h2c": {"127.0.0.32", h2cPort}, "held": {"127.0.0.33", heldPort}} {
		applyService(t, k, service(name, "", 80, be.port))
		putEndpointSlice(t, k, endpointSlice(name, "", be.port, map[string]bool{be.addr: true}))
	}

	prefix, regex := networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific
	tlsShop := nginxIngress("tls", "shop.example.com", nil, prefix, "/", "web", "http")
	tlsShop.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}}
	ingresses := []*networkingv1.Ingress{
		nginxIngress("rewrite", "rw.example.com", map[string]string{"rewrite-target": "/$2"}, regex, "/api(/|$)(.*)", "api", 8080),
		tlsShop,
		nginxIngress("closed", "closed.example.com", map[string]string{"whitelist-source-range": "10.0.0.0/8"}, prefix, "/", "web", "http"),
		nginxIngress("open", "open.example.com", map[string]string{"allowlist-source-range": "192.168.0.0/16, 127.0.0.0/8"}, prefix, "/", "web", "http"),
		nginxIngress("main", "canary.example.com", nil, prefix, "/", "web", "http"),
		nginxIngress("canary", "canary.example.com", map[string]string{"canary": "true", "canary-by-header": "X-Canary"}, prefix, "/", "api", 8080),
		nginxIngress("moved", "moved.example.com", map[string]string{"permanent-redirect": "https://example.org/new"}, prefix, "/", "web", "http"),
		nginxIngress("sticky", "sticky.example.com", map[string]string{"affinity": "cookie", "session-cookie-name": "route"}, prefix, "/", "web", "http"),
		nginxIngress("cors", "cors.example.com", map[string]string{"enable-cors": "true", "cors-allow-origin": "https://app.example.org", "cors-allow-methods": "GET, POST"}, prefix, "/", "api", 8080),
		nginxIngress("small", "small.example.com", map[string]string{"proxy-body-size": "1k"}, prefix, "/", "api", 8080),
		nginxIngress("approot", "approot.example.com", map[string]string{"app-root": "/app"}, prefix, "/", "web", "http"),
		nginxIngress("snippet", "snippet.example.com", map[string]string{"configuration-snippet": "deny all;"}, prefix, "/", "web", "http"),
		nginxIngress("mirror", "mirror.example.com", map[string]string{"mirror-target": "https://mirror.example/"}, prefix, "/", "web", "http"),
		nginxIngress("limited", "limited.example.com", map[string]string{"limit-rpm": "1", "limit-burst-multiplier": "1"}, prefix, "/", "web", "http"),
		nginxIngress("force", "force.example.com", map[string]string{"force-ssl-redirect": "true"}, prefix, "/", "web", "http"),
		nginxIngress("temp", "temp.example.com", map[string]string{"temporal-redirect": "https://example.org/maintenance"}, prefix, "/", "web", "http"),
		nginxIngress("main-c", "cookie.example.com", nil, prefix, "/", "web", "http"),
		nginxIngress("canary-c", "cookie.example.com", map[string]string{"canary": "true", "canary-by-cookie": "beta", "canary-weight": "0"}, prefix, "/", "api", 8080),
		nginxIngress("main-w", "weight.example.com", nil, prefix, "/", "web", "http"),
		nginxIngress("canary-w", "weight.example.com", map[string]string{"canary": "true", "canary-weight": "100", "canary-by-header": "X-Canary"}, prefix, "/", "api", 8080),
		nginxIngress("regex", "re.example.com", map[string]string{"use-regex": "true"}, regex, "/v[0-9]+/items", "web", "http"),
		nginxIngress("badlist", "badlist.example.com", map[string]string{"whitelist-source-range": "127.0.0.0/8, everyone"}, prefix, "/", "web", "http"),
		nginxIngress("auth", "auth.example.com", map[string]string{"auth-url": "http://auth.example/check"}, prefix, "/", "web", "http"),
		nginxIngress("secure", "secure.example.com", map[string]string{"backend-protocol": "HTTPS"}, prefix, "/", "secure", 80),
		nginxIngress("grpc", "grpc.example.com", map[string]string{"backend-protocol": "GRPC"}, prefix, "/", "h2c", 80),
		nginxIngress("held", "held.example.com", map[string]string{"limit-connections": "1"}, prefix, "/", "held", 80),
		nginxIngress("slow", "slow.example.com", map[string]string{"proxy-read-timeout": "1"}, prefix, "/", "held", 80),
	}
	for _, ing := range ingresses {
		if _, err := k.Client.NetworkingV1().Ingresses("web").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	flags := append(exampleWatchFlags(t, nginxExample), exampleFlag(t, nginxExample, "tls-secret-namespaces")...)
	e.startSidecar(t, append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms", "--publish-address", "203.0.113.7"}, flags...)...)
	e.startHAProxy(t)
	e.waitReady(t)

	origin := map[string]string{"Origin": "https://app.example.org"}
	waitNginxCases(t, e,
		nginxCase{"rewrite-target /$2 of /api(/|$)(.*)", nginxRequest{host: "rw.example.com", path: "/api/items/1?q=2"}, status(200, "api-1 /items/1\n")},
		nginxCase{"rewrite-target: the regular expression is case-insensitive", nginxRequest{host: "rw.example.com", path: "/API/x"}, status(200, "api-1 /x\n")},
		nginxCase{"rewrite-target: /api alone", nginxRequest{host: "rw.example.com", path: "/api"}, status(200, "api-1 /\n")},
		nginxCase{"rewrite-target: another path", nginxRequest{host: "rw.example.com", path: "/apiary"}, status(404, "no Ingress rule matches")},
		nginxCase{"ssl-redirect by default with TLS", nginxRequest{host: "shop.example.com", path: "/cart?x=1"}, redirect(308, "https://shop.example.com/cart?x=1")},
		nginxCase{"served on HTTPS", nginxRequest{host: "shop.example.com", path: "/cart", tls: true}, status(200, "web-")},
		nginxCase{"whitelist-source-range without the client", nginxRequest{host: "closed.example.com", path: "/"}, status(403, "")},
		nginxCase{"allowlist-source-range with the client", nginxRequest{host: "open.example.com", path: "/"}, status(200, "web-")},
		nginxCase{"canary-by-header: always", nginxRequest{host: "canary.example.com", path: "/", header: map[string]string{"X-Canary": "always"}}, status(200, "api-1")},
		nginxCase{"canary-by-header: never", nginxRequest{host: "canary.example.com", path: "/", header: map[string]string{"X-Canary": "never"}}, status(200, "web-")},
		nginxCase{"canary-by-header: absent", nginxRequest{host: "canary.example.com", path: "/"}, status(200, "web-")},
		nginxCase{"permanent-redirect", nginxRequest{host: "moved.example.com", path: "/old"}, redirect(301, "https://example.org/new")},
		nginxCase{"CORS preflight", nginxRequest{method: "OPTIONS", host: "cors.example.com", path: "/x", header: origin}, func(a answer) string {
			if a.code != 204 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example.org" || a.header.Get("Access-Control-Allow-Methods") != "GET, POST" {
				return fmt.Sprintf("%d %v, want 204 with the origin and methods", a.code, a.header)
			}
			return ""
		}},
		nginxCase{"CORS: an answer to an allowed origin", nginxRequest{host: "cors.example.com", path: "/x", header: origin}, func(a answer) string {
			if a.code != 200 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example.org" || a.header.Get("Access-Control-Allow-Credentials") != "true" {
				return fmt.Sprintf("%d %v, want 200 with the origin and credentials", a.code, a.header)
			}
			return ""
		}},
		nginxCase{"CORS: another origin", nginxRequest{host: "cors.example.com", path: "/x", header: map[string]string{"Origin": "https://evil.example"}}, func(a answer) string {
			if a.code != 200 || a.header.Get("Access-Control-Allow-Origin") != "" {
				return fmt.Sprintf("%d %v, want 200 without CORS headers", a.code, a.header)
			}
			return ""
		}},
		nginxCase{"proxy-body-size 1k: a larger body", nginxRequest{method: "POST", host: "small.example.com", path: "/", body: strings.Repeat("x", 2048)}, status(413, "")},
		nginxCase{"proxy-body-size 1k: a smaller one", nginxRequest{method: "POST", host: "small.example.com", path: "/", body: "small"}, status(200, "api-1")},
		nginxCase{"app-root", nginxRequest{host: "approot.example.com", path: "/"}, redirect(302, "/app")},
		nginxCase{"app-root: another path", nginxRequest{host: "approot.example.com", path: "/app"}, status(200, "web-")},
		nginxCase{"configuration-snippet: refused", nginxRequest{host: "snippet.example.com", path: "/"}, status(503, "Ingress web/snippet is not served: refused: configuration-snippet")},
		nginxCase{"an annotation not supported: served without", nginxRequest{host: "mirror.example.com", path: "/"}, status(200, "web-")},
		nginxCase{"force-ssl-redirect without TLS", nginxRequest{host: "force.example.com", path: "/a"}, redirect(308, "https://force.example.com/a")},
		nginxCase{"temporal-redirect", nginxRequest{host: "temp.example.com", path: "/"}, redirect(302, "https://example.org/maintenance")},
		nginxCase{"canary-by-cookie: always", nginxRequest{host: "cookie.example.com", path: "/", header: map[string]string{"Cookie": "beta=always"}}, status(200, "api-1")},
		nginxCase{"canary-by-cookie: absent, weight 0", nginxRequest{host: "cookie.example.com", path: "/"}, status(200, "web-")},
		nginxCase{"canary-weight 100", nginxRequest{host: "weight.example.com", path: "/"}, status(200, "api-1")},
		nginxCase{"canary-weight 100, header never first", nginxRequest{host: "weight.example.com", path: "/", header: map[string]string{"X-Canary": "never"}}, status(200, "web-")},
		nginxCase{"use-regex: a match, case-insensitive", nginxRequest{host: "re.example.com", path: "/V12/items/3"}, status(200, "web-")},
		nginxCase{"use-regex: no match", nginxRequest{host: "re.example.com", path: "/vx/items"}, status(404, "no Ingress rule matches")},
		nginxCase{"whitelist-source-range that is not CIDRs: closed", nginxRequest{host: "badlist.example.com", path: "/"}, status(403, "")},
		nginxCase{"auth-url: refused", nginxRequest{host: "auth.example.com", path: "/"}, status(503, "Ingress web/auth is not served: refused: auth-url")},
		nginxCase{"backend-protocol HTTPS", nginxRequest{host: "secure.example.com", path: "/x"}, status(200, "tls HTTP/1.1 /x")},
		nginxCase{"backend-protocol GRPC: HTTP/2 to the pods", nginxRequest{host: "grpc.example.com", path: "/x"}, status(200, "clear HTTP/2.0 /x")},
	)

	t.Run("limit-connections 1: a second request while one is in progress is refused", func(t *testing.T) {
		first := make(chan answer, 1)
		go func() {
			a, _ := nginxRequest{host: "held.example.com", path: "/"}.do(e)
			first <- a
		}()
		<-held.arrived // the first request is at the backend, its connection counted
		if a, err := (nginxRequest{host: "held.example.com", path: "/"}).do(e); err != nil || a.code != 503 {
			t.Errorf("second request: %d %v, want 503", a.code, err)
		}
		held.release <- struct{}{}
		if a := <-first; a.code != 200 {
			t.Errorf("first request: %d %q, want 200", a.code, a.body)
		}
	})

	t.Run("proxy-read-timeout 1: a backend that does not answer within 1 s is a 504", func(t *testing.T) {
		a, err := nginxRequest{host: "slow.example.com", path: "/"}.do(e)
		<-held.arrived
		if err != nil || a.code != 504 {
			t.Errorf("%d %q %v, want 504", a.code, a.body, err)
		}
	})

	t.Run("affinity cookie: the server the cookie names answers every request", func(t *testing.T) {
		first, err := nginxRequest{host: "sticky.example.com", path: "/"}.do(e)
		if err != nil || first.code != 200 {
			t.Fatalf("first request: %+v %v", first, err)
		}
		cookie := first.header.Get("Set-Cookie")
		if !strings.HasPrefix(cookie, "route=") || !strings.Contains(cookie, fmt.Sprint(e.port)) {
			t.Fatalf("Set-Cookie %q, want the route cookie naming a server", cookie)
		}
		value := strings.SplitN(cookie, ";", 2)[0]
		for i := range 8 {
			a, err := nginxRequest{host: "sticky.example.com", path: "/", header: map[string]string{"Cookie": value}}.do(e)
			if err != nil || a.code != 200 || a.body != first.body {
				t.Fatalf("request %d with %s: %d %q %v, want %q", i, value, a.code, a.body, err, first.body)
			}
		}
	})

	t.Run("limit-rpm 1, burst multiplier 1: the third request of the minute is refused", func(t *testing.T) {
		// nginx lets limit + burst (1 + 1) through at once: so does HAProxy, not a third.
		r := nginxRequest{host: "limited.example.com", path: "/"}
		for i := range 2 {
			if a, err := r.do(e); err != nil || a.code != 200 {
				t.Fatalf("request %d: %d %v, want 200", i+1, a.code, err)
			}
		}
		if a, err := r.do(e); err != nil || a.code != 503 {
			t.Errorf("third request: %d %v, want 503", a.code, err)
		}
	})

	t.Run("Warning Events name the annotations not served; every Ingress gets the address", func(t *testing.T) {
		want := map[string]string{
			"snippet": "refused: configuration-snippet: nginx configuration, which HAProxy cannot run",
			"mirror":  "mirror-target: not supported, ignored",
		}
		for name, msg := range want {
			haproxytest.WaitFor(t, 15*time.Second, func() bool {
				evs, err := k.Client.CoreV1().Events("web").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Ingress,involvedObject.name=" + name})
				if err != nil {
					return false
				}
				for _, ev := range evs.Items {
					if ev.Type == corev1.EventTypeWarning && ev.Reason == "UnsupportedAnnotation" && ev.Message == msg && ev.InvolvedObject.UID != "" {
						return true
					}
				}
				return false
			}, "a Warning Event on Ingress web/"+name+": "+msg)
		}
		evs, err := k.Client.CoreV1().Events("web").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Ingress,involvedObject.name=rewrite"})
		if err != nil || len(evs.Items) != 0 {
			t.Errorf("events on an Ingress whose annotations are all served: %v %v", evs, err)
		}
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			ing, err := k.Client.NetworkingV1().Ingresses("web").Get(ctx, "snippet", metav1.GetOptions{})
			return err == nil && len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].IP == "203.0.113.7"
		}, "the Ingress's status has the published address")
	})
}

// serveBackend serves on ip (a free port, returned) what it is asked: "tls" or "clear", the
// protocol and the path; setup adjusts the server (HTTP/2 in clear); withTLS serves TLS with a
// certificate of its own.
func serveBackend(t *testing.T, ip string, setup func(*http.Server), withTLS bool) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := "clear"
		if r.TLS != nil {
			conn = "tls"
		}
		fmt.Fprintf(w, "%s %s %s\n", conn, r.Proto, r.URL.Path)
	})}
	setup(srv)
	if withTLS {
		cert, key := testcert.Pair(t, ip)
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}})
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// serveBackendHandler serves h on ip, a free port, which it returns.
func serveBackendHandler(t *testing.T, ip string, h http.Handler) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// holdingBackend holds each request until release (or until the client goes away), saying on
// arrived that one came.
type holdingBackend struct {
	arrived chan struct{}
	release chan struct{}
}

func (h *holdingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.arrived <- struct{}{}
	select {
	case <-h.release:
		fmt.Fprintln(w, "released")
	case <-r.Context().Done():
	}
}
