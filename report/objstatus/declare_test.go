package objstatus

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func accepted() Condition {
	return Condition{Type: Accepted, True: true, Reason: Accepted, Message: defaultMessages[Accepted]}
}
func programmed() Condition {
	return Condition{Type: Programmed, True: true, Reason: Programmed, Message: defaultMessages[Programmed]}
}
func resolved() Condition {
	return Condition{Type: ResolvedRefs, True: true, Reason: ResolvedRefs, Message: defaultMessages[ResolvedRefs]}
}
func noConflicts() Condition {
	return Condition{Type: Conflicted, Reason: "NoConflicts", Message: defaultMessages[Conflicted]}
}
func supported() Condition {
	return Condition{Type: SupportedVersion, True: true, Reason: SupportedVersion, Message: defaultMessages[SupportedVersion]}
}

// TestParse: each form of a declaration, and what is refused (with the line), from a table.
func TestParse(t *testing.T) {
	route := func(parent Parent, gen int64, conds ...Condition) Declaration {
		return Declaration{Line: 1, Object: Object{KindHTTPRoute, "web", "shop"}, Generation: gen, Parent: parent, Conditions: conds}
	}
	gw := Parent{Namespace: "lb", Name: "haproxy"}
	tests := []struct {
		name string
		line string
		want *Declaration // nil: refused
		bad  string       // in the problem
	}{
		{"an Ingress", "# haproxy-sidecar: serves Ingress web/shop",
			&Declaration{Line: 1, Object: Object{KindIngress, "web", "shop"}}, ""},
		{"an Ingress with a warning", `# haproxy-sidecar: serves Ingress web/shop warning="annotation nginx.ingress.kubernetes.io/x: not supported" warning.reason=UnsupportedAnnotation`,
			&Declaration{Line: 1, Object: Object{KindIngress, "web", "shop"}, Warning: "annotation nginx.ingress.kubernetes.io/x: not supported", WarningReason: "UnsupportedAnnotation"}, ""},
		{"an Ingress with a warning, the default reason", `# haproxy-sidecar: serves Ingress web/shop warning="x"`,
			&Declaration{Line: 1, Object: Object{KindIngress, "web", "shop"}, Warning: "x", WarningReason: DefaultWarningReason}, ""},
		{"a warning reason that is not a word", `# haproxy-sidecar: serves Ingress web/shop warning=x warning.reason="a b"`, nil, "want a CamelCase word"},
		{"a Gateway takes no warning", `# haproxy-sidecar: serves Gateway lb/gw warning=x`, nil, "warning: not an attribute of Gateway"},
		{"indented, tabs, no space after #", "\t  #haproxy-sidecar:\tserves  Ingress\tweb/shop  ",
			&Declaration{Line: 1, Object: Object{KindIngress, "web", "shop"}}, ""},
		{"a Gateway: accepted and programmed by default", "# haproxy-sidecar: serves Gateway lb/haproxy generation=3",
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Generation: 3, Conditions: []Condition{accepted(), programmed()}}, ""},
		{"a Gateway not programmed, with its reason and message", `# haproxy-sidecar: serves Gateway lb/haproxy programmed=false reason=Invalid message="listener https: no certificate"`,
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Conditions: []Condition{accepted(),
				{Type: Programmed, Reason: "Invalid", Message: "listener https: no certificate"}}}, ""},
		{"a route parent, every condition named", "# haproxy-sidecar: serves HTTPRoute web/shop generation=5 parent=lb/haproxy section=https port=443 accepted resolved",
			ptr(route(Parent{"lb", "haproxy", "https", 443}, 5, accepted(), resolved())), ""},
		{"a route parent, true by default", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy",
			ptr(route(gw, 0, accepted(), resolved())), ""},
		{"a backend not found: reason and message go to the false condition", `# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy accepted resolved=false reason=BackendNotFound message="rule 1: Service web/missing not found"`,
			ptr(route(gw, 0, accepted(), Condition{Type: ResolvedRefs, Reason: "BackendNotFound", Message: "rule 1: Service web/missing not found"})), ""},
		{"both false, each with its own reason", `# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy accepted=false accepted.reason=NotAllowedByListeners resolved=false resolved.reason=InvalidKind resolved.message="a \"quoted\" \u003cword\u003e"`,
			ptr(route(gw, 0, Condition{Type: Accepted, Reason: "NotAllowedByListeners"}, Condition{Type: ResolvedRefs, Reason: "InvalidKind", Message: `a "quoted" <word>`})), ""},
		{"a true condition's own reason", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy accepted.reason=Attached",
			ptr(route(gw, 0, Condition{Type: Accepted, True: true, Reason: "Attached", Message: defaultMessages[Accepted]}, resolved())), ""},
		{"a GatewayClass: no namespace, accepted and its version supported by default", "# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=2",
			&Declaration{Line: 1, Object: Object{Kind: KindGatewayClass, Name: "haproxy-sidecar"}, Generation: 2, Conditions: []Condition{accepted(), supported()}}, ""},
		{"a Gateway's addresses", "# haproxy-sidecar: serves Gateway lb/haproxy addresses=10.244.0.5,lb.example.com",
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Addresses: []Address{{IP: "10.244.0.5"}, {Hostname: "lb.example.com"}}, Conditions: []Condition{accepted(), programmed()}}, ""},
		{"a listener: all fine by default, not conflicted", "# haproxy-sidecar: serves Gateway lb/haproxy listener=http attached=3 kinds=HTTPRoute,example.com/FooRoute",
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Listener: "http", Attached: 3,
				Kinds: []RouteKind{{gatewayGroup, "HTTPRoute"}, {"example.com", "FooRoute"}}, Conditions: []Condition{accepted(), programmed(), resolved(), noConflicts()}}, ""},
		{"a listener whose certificate does not resolve: the reason goes to the false conditions, not to Conflicted", `# haproxy-sidecar: serves Gateway lb/haproxy listener=https kinds="" programmed=false resolved=false reason=InvalidCertificateRef message="no Secret lb/x"`,
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Listener: "https", Kinds: []RouteKind{},
				Conditions: []Condition{accepted(), {Type: Programmed, Reason: "InvalidCertificateRef", Message: "no Secret lb/x"}, {Type: ResolvedRefs, Reason: "InvalidCertificateRef", Message: "no Secret lb/x"}, noConflicts()}}, ""},
		{"a conflicted listener", "# haproxy-sidecar: serves Gateway lb/haproxy listener=a conflicted=true conflicted.reason=HostnameConflict accepted=false accepted.reason=HostnameConflict",
			&Declaration{Line: 1, Object: Object{KindGateway, "lb", "haproxy"}, Listener: "a",
				Conditions: []Condition{{Type: Accepted, Reason: "HostnameConflict"}, programmed(), resolved(), {Type: Conflicted, True: true, Reason: "HostnameConflict"}}}, ""},
		{"another comment", "# haproxy-sidecar is great", nil, ""},
		{"not a comment", "  http-request set-header X haproxy-sidecar: serves Ingress web/shop", nil, ""},

		{"another verb", "# haproxy-sidecar: writes Ingress web/shop", nil, "want haproxy-sidecar: serves KIND"},
		{"another kind", "# haproxy-sidecar: serves Service web/shop", nil, `kind "Service"`},
		{"no namespace", "# haproxy-sidecar: serves Ingress shop", nil, "want NAMESPACE/NAME"},
		{"a name that is not one", "# haproxy-sidecar: serves Ingress web/Shop_1", nil, "want NAMESPACE/NAME"},
		{"an attribute an Ingress does not take", "# haproxy-sidecar: serves Ingress web/shop generation=2", nil, "generation: not an attribute of Ingress (warning=, warning.reason=)"},
		{"a GatewayClass with a namespace", "# haproxy-sidecar: serves GatewayClass lb/haproxy", nil, "want the GatewayClass's NAME"},
		{"a listener's attribute on a Gateway", "# haproxy-sidecar: serves Gateway lb/haproxy attached=1", nil, "attached: not an attribute of Gateway"},
		{"a Gateway's attribute on a listener", "# haproxy-sidecar: serves Gateway lb/haproxy listener=http addresses=10.0.0.1", nil, "addresses: not an attribute of Gateway"},
		{"a listener's conditions on a Gateway", "# haproxy-sidecar: serves Gateway lb/haproxy resolved=false reason=X", nil, "resolved: not an attribute of Gateway"},
		{"kinds that are not", "# haproxy-sidecar: serves Gateway lb/haproxy listener=http kinds=HTTPRoute,,", nil, "want KIND or GROUP/KIND"},
		{"attached not a number", "# haproxy-sidecar: serves Gateway lb/haproxy listener=http attached=-1", nil, "want a number of routes"},
		{"a listener name that is not one", "# haproxy-sidecar: serves Gateway lb/haproxy listener=Http_1", nil, "want a listener name"},
		{"a typo", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy resovled=false", nil, "resovled: not an attribute of HTTPRoute"},
		{"a route without parent", "# haproxy-sidecar: serves HTTPRoute web/shop accepted", nil, "needs parent=NAMESPACE/NAME"},
		{"false without reason", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy resolved=false", nil, "resolved=false needs its reason"},
		{"a reason that is not a word", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy resolved=false reason=not-found", nil, `reason "not-found"`},
		{"a boolean that is not one", "# haproxy-sidecar: serves Gateway lb/haproxy accepted=yes", nil, "accepted=yes: want true or false"},
		{"a generation that is not one", "# haproxy-sidecar: serves Gateway lb/haproxy generation=0", nil, "want a positive number"},
		{"a port out of range", "# haproxy-sidecar: serves HTTPRoute web/shop parent=lb/haproxy port=70000", nil, "want 1 to 65535"},
		{"twice the same attribute", "# haproxy-sidecar: serves Gateway lb/haproxy generation=1 generation=2", nil, "generation given twice"},
		{"an unquoted value with a quote", `# haproxy-sidecar: serves Gateway lb/haproxy programmed=false reason=Invalid message=a"b`, nil, "must be quoted as a whole"},
		{"a quoted value that does not end", `# haproxy-sidecar: serves Gateway lb/haproxy programmed=false reason=Invalid message="a b`, nil, "does not end"},
		{"a quoted value that is not JSON", `# haproxy-sidecar: serves Gateway lb/haproxy programmed=false reason=Invalid message="a\qb"`, nil, "not a JSON string"},
		{"an empty value", "# haproxy-sidecar: serves Gateway lb/haproxy generation=", nil, "generation= has no value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			decls, problems := Parse([]byte(tc.line + "\n"))
			switch {
			case tc.bad != "":
				if len(decls) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), tc.bad) || !strings.Contains(problems[0].Error(), "line 1") {
					t.Fatalf("Parse = %+v, %v; want one problem of line 1 with %q", decls, problems, tc.bad)
				}
			case tc.want == nil:
				if len(decls) != 0 || len(problems) != 0 {
					t.Fatalf("Parse = %+v, %v; want nothing", decls, problems)
				}
			default:
				if len(problems) != 0 || len(decls) != 1 || !reflect.DeepEqual(decls[0], *tc.want) {
					t.Fatalf("Parse = %+v, %v\nwant %+v", decls, problems, *tc.want)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestParseLines: the line numbers, and a bad declaration leaves the others standing.
func TestParseLines(t *testing.T) {
	cfg := "global\n  # haproxy-sidecar: serves Ingress web/a\n# haproxy-sidecar: serves Ingress b\nfrontend x\n# haproxy-sidecar: serves Ingress web/c\n"
	decls, problems := Parse([]byte(cfg))
	if len(decls) != 2 || decls[0].Line != 2 || decls[0].Name != "a" || decls[1].Line != 5 || decls[1].Name != "c" {
		t.Errorf("declarations %+v", decls)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "line 3") {
		t.Errorf("problems %v", problems)
	}
}

// TestCollect: declarations grouped by object; repeats left out, with a problem when they
// differ.
func TestCollect(t *testing.T) {
	cfg := `# haproxy-sidecar: serves Ingress web/a
# haproxy-sidecar: serves Ingress web/a
# haproxy-sidecar: serves Gateway lb/gw generation=2
# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=http
# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=https resolved=false reason=BackendNotFound
# haproxy-sidecar: serves HTTPRoute web/r generation=4 parent=lb/gw section=http accepted=false reason=NotAllowedByListeners
# haproxy-sidecar: serves HTTPRoute web/r generation=5 parent=lb/other
`
	decls, problems := Parse([]byte(cfg))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	got, problems := collectWants(decls)
	want := map[Object]Want{
		{KindIngress, "web", "a"}: {},
		{KindGateway, "lb", "gw"}: {Generation: 2, Conditions: []Condition{accepted(), programmed()}},
		{KindHTTPRoute, "web", "r"}: {Generation: 4, Parents: []ParentWant{
			{Parent{"lb", "gw", "http", 0}, []Condition{accepted(), resolved()}},
			{Parent{"lb", "gw", "https", 0}, []Condition{accepted(), {Type: ResolvedRefs, Reason: "BackendNotFound"}}},
			{Parent{"lb", "other", "", 0}, []Condition{accepted(), resolved()}},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Collect =\n%+v\nwant\n%+v", got, want)
	}
	if len(problems) != 2 || !strings.Contains(problems[0].Error(), "line 6: HTTPRoute web/r parent lb/gw section http declared again, differently (line 4 stands)") ||
		!strings.Contains(problems[1].Error(), "line 7: HTTPRoute web/r: generation 5, line 4 said 4") {
		t.Errorf("problems %v", problems)
	}
}

// TestCollectListeners: a Gateway's listener lines make its listeners, in their order, beside
// what its own line says (a Gateway declared by its listeners only: accepted and programmed);
// a listener declared twice, differently, is a problem.
func TestCollectListeners(t *testing.T) {
	cfg := `# haproxy-sidecar: serves Gateway lb/gw listener=https generation=2 attached=0 kinds=HTTPRoute resolved=false reason=RefNotPermitted
# haproxy-sidecar: serves Gateway lb/gw generation=2 accepted.reason=ListenersNotValid addresses=10.244.0.5
# haproxy-sidecar: serves Gateway lb/gw listener=http generation=2 attached=2 kinds=HTTPRoute
# haproxy-sidecar: serves Gateway lb/gw listener=http generation=2 attached=3 kinds=HTTPRoute
# haproxy-sidecar: serves Gateway lb/other listener=http attached=1 kinds=HTTPRoute
# haproxy-sidecar: serves GatewayClass haproxy-sidecar
`
	decls, problems := Parse([]byte(cfg))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	got, problems := collectWants(decls)
	httpRoute := []RouteKind{{gatewayGroup, "HTTPRoute"}}
	ok := []Condition{accepted(), programmed(), resolved(), noConflicts()}
	want := map[Object]Want{
		{KindGateway, "lb", "gw"}: {Generation: 2, Addresses: []Address{{IP: "10.244.0.5"}},
			Conditions: []Condition{{Type: Accepted, True: true, Reason: "ListenersNotValid", Message: defaultMessages[Accepted]}, programmed()},
			Listeners: []ListenerWant{
				{Name: "https", Kinds: httpRoute, Conditions: []Condition{accepted(), programmed(), {Type: ResolvedRefs, Reason: "RefNotPermitted"}, noConflicts()}},
				{Name: "http", Attached: 2, Kinds: httpRoute, Conditions: ok},
			}},
		{KindGateway, "lb", "other"}:              {Conditions: []Condition{accepted(), programmed()}, Listeners: []ListenerWant{{Name: "http", Attached: 1, Kinds: httpRoute, Conditions: ok}}},
		{KindGatewayClass, "", "haproxy-sidecar"}: {Conditions: []Condition{accepted(), supported()}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Collect =\n%+v\nwant\n%+v", got, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "line 4: Gateway lb/gw listener http declared again, differently (line 3 stands)") {
		t.Errorf("problems %v", problems)
	}
}

// BenchmarkParseCollect reads the declarations of a haproxy.cfg serving 10,000 Ingresses (one
// declaration and a backend of 6 lines each), as the status writer does with each rendering
// that goes live.
func BenchmarkParseCollect(b *testing.B) {
	var cfg strings.Builder
	cfg.WriteString("global\n  master-worker\n\nfrontend http\n  bind :80\n  use_backend %[req.hdr(host),map(/etc/haproxy/maps/routes.map)]\n\n")
	for i := range 10000 {
		fmt.Fprintf(&cfg, "# haproxy-sidecar: serves Ingress web/ing-%05d\nbackend web_svc-%05d_80\n  mode http\n  balance roundrobin\n  option httpchk GET /healthz\n  server-template srv 1-4 svc-%05d.web.svc:80 check resolvers dns init-addr none\n  server s0 10.0.%d.%d:8080 check\n\n", i, i, i, i/250, i%250)
	}
	data := []byte(cfg.String())
	b.ReportAllocs()
	for b.Loop() {
		decls, problems := Parse(data)
		wants, more := collectWants(decls)
		if len(problems)+len(more) > 0 || len(wants) != 10000 {
			b.Fatalf("%d objects, problems %v %v", len(wants), problems, more)
		}
	}
}

// collectWants is collect of declarations made in a test, as plain Wants by object.
func collectWants(decls []Declaration) (map[Object]Want, []error) {
	at := make([]declAt, len(decls))
	lines := make([]parsedLine, len(decls))
	for i := range decls {
		lines[i].more = &decls[i]
		at[i] = declAt{p: &lines[i], line: decls[i].Line}
	}
	set, problems := collect(at)
	out := make(map[Object]Want, len(set))
	for o := range set {
		out[o] = set.get(o)
	}
	return out, problems
}
