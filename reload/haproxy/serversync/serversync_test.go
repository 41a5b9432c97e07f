package serversync

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Params
		wantErr string
	}{
		{"", Params{}, ""},
		{"check send-proxy-v2", Params{"check": "enabled", "send-proxy-v2": "enabled"}, ""},
		{"no-check enabled", Params{"check": "disabled", Maintenance: "disabled"}, ""},
		{"disabled weight 10", Params{Maintenance: "enabled", "weight": "10"}, ""},
		{"inter 2s fall 3 rise 2 slowstart 1m", Params{"inter": "2000", "fall": "3", "rise": "2", "slowstart": "60000"}, ""},
		{"inter 500ms downinter 1500us", Params{"inter": "500", "downinter": "1"}, ""},
		{"check no-check", Params{"check": "disabled"}, ""}, // the last one counts, as in HAProxy
		{"ssl verify none sni str(example.com) ca-file /etc/ca.pem crt /etc/c.pem", Params{"ssl": "enabled", "verify": "none", "sni": "str(example.com)", "ssl_cafile": "/etc/ca.pem", "ssl_certificate": "/etc/c.pem"}, ""},
		{"proxy-v2-options ssl,cert-cn allow-0rtt", Params{"proxy-v2-options": "ssl,cert-cn", "allow_0rtt": "true"}, ""},
		{"no-tlsv10 port 8081 addr 10.0.0.9", Params{"force_tlsv10": "disabled", "health_check_port": "8081", "health_check_address": "10.0.0.9"}, ""},
		{`check "weight" 5`, Params{"check": "enabled", "weight": "5"}, ""},
		{"check # a comment weight 5", Params{"check": "enabled"}, ""},
		{"check source 10.0.0.1", nil, `"source" has no field`},
		{"check set-proxy-v2-tlv-fmt(0x20) %[fc_pp_authority]", nil, `"set-proxy-v2-tlv-fmt(0x20)" has no field`},
		{"weight", nil, `"weight" needs a value`},
		{"weight ten", nil, `weight "ten": want a whole number`},
		{"inter soon", nil, `inter "soon": want a time`},
	} {
		t.Run(tc.line, func(t *testing.T) {
			words := strings.Fields(tc.line)
			got, err := ParseParams(words)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSplitAddress(t *testing.T) {
	for _, tc := range []struct {
		in      string
		addr    string
		port    int64
		wantErr bool
	}{
		{"10.0.0.1:30443", "10.0.0.1", 30443, false},
		{"10.0.0.1", "10.0.0.1", 0, false},
		{"[2001:db8::1]:80", "2001:db8::1", 80, false},
		{"[2001:db8::1]", "2001:db8::1", 0, false},
		{"2001:db8::1:80", "2001:db8::1", 80, false},
		{"node-1.example:8080", "node-1.example", 8080, false},
		{"unix@/run/app.sock", "unix@/run/app.sock", 0, false},
		{"10.0.0.1:8000-8010", "", 0, true},
		{"10.0.0.1:+1000", "", 0, true},
		{"10.0.0.1:0", "", 0, true},
		{":80", "", 0, true},
	} {
		addr, port, err := SplitAddress(tc.in)
		if (err != nil) != tc.wantErr || addr != tc.addr || port != tc.port {
			t.Errorf("SplitAddress(%q) = %q, %d, %v; want %q, %d, error %v", tc.in, addr, port, err, tc.addr, tc.port, tc.wantErr)
		}
	}
}

// The JSON the API answers reads back into the same parameters: what the sidecar sends is what
// it compares with next time, so an unchanged rendering changes nothing.
func TestJSONRoundTrip(t *testing.T) {
	s := Server{Name: "node-1", Address: "2001:db8::1", Port: 30443, Params: Params{
		"check": "enabled", "send-proxy-v2": "enabled", "weight": "10", "inter": "2000",
		"allow_0rtt": "true", "proxy-v2-options": "ssl,cert-cn", Maintenance: "enabled",
	}}
	b, err := json.Marshal(s.JSON())
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	// Fields the sidecar cannot write are ignored when reading.
	m["metadata"] = map[string]any{"owner": "someone"}
	got, err := ServerFromJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(s) {
		t.Errorf("round trip:\n got %s\nwant %s", got.Line(), s.Line())
	}
	if m["weight"] != json.Number("10") || m["allow_0rtt"] != true {
		t.Errorf("JSON types: weight %#v, allow_0rtt %#v; want a number and a boolean", m["weight"], m["allow_0rtt"])
	}
}

const rendered = `global
  log stdout format raw local0
defaults
  mode tcp
  default-server inter 3s
frontend https
  bind :443
  default_backend nodes_https
backend nodes_https
  balance roundrobin
  default-server send-proxy-v2 check
  server node-1 10.0.0.1:30443 weight 10
  server node-2 10.0.0.2:30443 disabled
backend static
  server s1 10.0.0.9:80
listen stats
  bind :8404
  server x 10.0.0.10:80
`

func TestFromConfig(t *testing.T) {
	t.Run("every backend, not listen sections; the backend's own default-server only", func(t *testing.T) {
		got, err := FromConfig([]byte(rendered), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []Backend{
			{Name: "nodes_https", DefaultServer: Params{"send-proxy-v2": "enabled", "check": "enabled"}, Servers: []Server{
				{Name: "node-1", Address: "10.0.0.1", Port: 30443, Params: Params{"weight": "10"}},
				{Name: "node-2", Address: "10.0.0.2", Port: 30443, Params: Params{Maintenance: "enabled"}},
			}},
			{Name: "static", Servers: []Server{{Name: "s1", Address: "10.0.0.9", Port: 80, Params: Params{}}}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("the backends named", func(t *testing.T) {
		got, err := FromConfig([]byte(rendered), []string{"static"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != "static" {
			t.Errorf("got %+v, want static only", got)
		}
	})
	t.Run("an empty backend has no servers", func(t *testing.T) {
		got, err := FromConfig([]byte("backend be\n  balance roundrobin\n"), nil)
		if err != nil || len(got) != 1 || len(got[0].Servers) != 0 || got[0].DefaultServer != nil {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	for _, tc := range []struct {
		name, config string
		only         []string
		want         string
	}{
		{"a backend named that the rendering lacks", rendered, []string{"static", "be_api"}, "has no backend be_api (named by --dataplane-backends)"},
		{"a keyword without a field", "backend be\n  server s1 10.0.0.1:80 check source 10.0.0.2\n", nil, "line 2: backend be, server s1: \"source\" has no field"},
		{"a default-server keyword without a field", "backend be\n  default-server check usesrc clientip\n", nil, "backend be, default-server: \"usesrc\" has no field"},
		{"a port range", "backend be\n  server s1 10.0.0.1:80-90\n", nil, "line 2: backend be, server s1: address \"10.0.0.1:80-90\""},
		{"a server twice", "backend be\n  server s1 10.0.0.1:80\n  server s1 10.0.0.2:80\n", nil, "line 3: backend be: server s1 is written twice"},
		{"conditional blocks", ".if defined(X)\nbackend be\n  server s1 10.0.0.1:80\n.endif\n", nil, "conditional blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromConfig([]byte(tc.config), tc.only)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func srv(name, addr string, port int64, params ...string) Server {
	s := Server{Name: name, Address: addr, Port: port, Params: Params{}}
	for i := 0; i+1 < len(params); i += 2 {
		s.Params[params[i]] = params[i+1]
	}
	return s
}

func TestDecide(t *testing.T) {
	n1 := srv("node-1", "10.0.0.1", 30443, "check", "enabled")
	n2 := srv("node-2", "10.0.0.2", 30443, "check", "enabled")
	n3 := srv("node-3", "10.0.0.3", 30443, "check", "enabled")
	n2Maint := srv("node-2", "10.0.0.2", 30443, "check", "enabled", Maintenance, "enabled")
	n2Moved := srv("node-2", "10.0.0.22", 30443, "check", "enabled")
	proxy := Params{"send-proxy-v2": "enabled", "check": "enabled"}
	be := func(ds Params, servers ...Server) []Backend {
		return []Backend{{Name: "nodes", DefaultServer: ds, Servers: servers}}
	}
	host := func(ds Params, servers ...Server) Host { return Host{"nodes": {DefaultServer: ds, Servers: servers}} }
	for _, tc := range []struct {
		name     string
		want     []Backend
		has      Host
		previous []Backend
		plan     Plan
	}{
		{name: "the host has it: nothing", want: be(proxy, n1, n2), has: host(proxy, n1, n2), plan: Plan{}},
		{name: "a new node is added, a gone one deleted, a moved one replaced, in one transaction",
			want: be(nil, n1, n2Moved, n3), has: host(nil, n1, n2, srv("node-9", "10.0.0.9", 30443)),
			plan: Plan{Ops: []Op{
				{Action: DeleteServer, Backend: "nodes", Server: Server{Name: "node-9"}},
				{Action: ReplaceServer, Backend: "nodes", Server: n2Moved},
				{Action: AddServer, Backend: "nodes", Server: n3},
			}}},
		{name: "the backend's default-server is set when the rendering writes one",
			want: be(proxy, n1), has: host(Params{"check": "enabled"}, n1),
			plan: Plan{Ops: []Op{{Action: SetDefaultServer, Backend: "nodes", DefaultServer: proxy}}}},
		{name: "and left as the host has it when the rendering writes none",
			want: be(nil, n1), has: host(proxy, n1), plan: Plan{}},
		{name: "a state alone goes through the runtime API",
			want: be(nil, n1, n2Maint), has: host(nil, n1, n2),
			plan: Plan{States: []StateChange{{"nodes", "node-2", StateMaint}}}},
		{name: "a state set at runtime before is not set again",
			want: be(nil, n1, n2Maint), has: host(nil, n1, n2), previous: be(nil, n1, n2Maint),
			plan: Plan{}},
		{name: "back to the stored state: set at runtime, nothing to store",
			want: be(nil, n1, n2), has: host(nil, n1, n2), previous: be(nil, n1, n2Maint),
			plan: Plan{States: []StateChange{{"nodes", "node-2", StateReady}}}},
		{name: "a transaction for something else writes the stale state too, and sets nothing at runtime",
			want: be(nil, n1, n2Maint, n3), has: host(nil, n1, n2), previous: be(nil, n1, n2Maint),
			plan: Plan{Ops: []Op{
				{Action: ReplaceServer, Backend: "nodes", Server: n2Maint},
				{Action: AddServer, Backend: "nodes", Server: n3},
			}}},
		{name: "a state and another change of the same server: replaced",
			want: be(nil, srv("node-1", "10.0.0.1", 30443, "check", "enabled", Maintenance, "enabled", "weight", "5")), has: host(nil, n1),
			plan: Plan{Ops: []Op{{Action: ReplaceServer, Backend: "nodes", Server: srv("node-1", "10.0.0.1", 30443, "check", "enabled", Maintenance, "enabled", "weight", "5")}}}},
		{name: "a backend the host lacks is reported, the others still synced",
			want: append(be(nil, n1, n2), Backend{Name: "api", Servers: []Server{n3}}),
			has:  host(nil, n1),
			plan: Plan{Missing: []string{"api"}, Ops: []Op{{Action: AddServer, Backend: "nodes", Server: n2}}}},
		{name: "no servers left: all deleted",
			want: be(nil), has: host(nil, n1, n2),
			plan: Plan{Ops: []Op{
				{Action: DeleteServer, Backend: "nodes", Server: Server{Name: "node-1"}},
				{Action: DeleteServer, Backend: "nodes", Server: Server{Name: "node-2"}},
			}}},
		{name: "ops grouped by backend in the rendering's order",
			want: []Backend{{Name: "b", Servers: []Server{n1}}, {Name: "a", DefaultServer: proxy, Servers: []Server{n2}}},
			has:  Host{"a": {}, "b": {}},
			plan: Plan{Ops: []Op{
				{Action: AddServer, Backend: "b", Server: n1},
				{Action: SetDefaultServer, Backend: "a", DefaultServer: proxy},
				{Action: AddServer, Backend: "a", Server: n2},
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.want, tc.has, tc.previous)
			if !reflect.DeepEqual(got, tc.plan) {
				t.Errorf("got  %+v\nwant %+v", got, tc.plan)
			}
			if got.Empty() != (len(tc.plan.Ops) == 0 && len(tc.plan.States) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}
