package runtimeapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
)

// reportCPU reports the process's CPU time per operation since cpu (cputime.Process), as
// cpu-ms/op: with other processes on the machine, the wall clock (ns/op) counts their time.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// bigConfig is 10,000 backends of 10 servers each, like the scale benchmarks.
func bigConfig(changed int) []byte {
	var b strings.Builder
	b.WriteString("global\n    maxconn 50000\ndefaults\n    mode http\n    default-server inter 2s fall 3 rise 2\nfrontend fe\n    bind :80\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&b, "    use_backend be_%d if { hdr(host) -i s%d.example }\n", i, i)
	}
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&b, "\nbackend be_%d\n    balance roundrobin\n", i)
		for j := 0; j < 10; j++ {
			port := 8080
			if i == changed && j == 3 {
				port = 8081
			}
			fmt.Fprintf(&b, "    server pod-%d-%d 10.%d.%d.%d:%d check\n", i, j, i/250, i%250, j+1, port)
		}
	}
	return []byte(b.String())
}

// BenchmarkPlan10kBackends: comparing two renderings of 10,000 backends x 10 servers that
// differ by one server's port.
func BenchmarkPlan10kBackends(b *testing.B) {
	old, next := bigConfig(-1), bigConfig(5000)
	u := track(New(Options{Client: &fakeClient{}}))
	u.Reloaded(u.Plan(old, nil, nil))
	b.SetBytes(int64(len(next)))
	b.ReportAllocs()
	defer reportCPU(b, cputime.Process())
	for b.Loop() {
		p := u.Plan(next, nil, nil)
		if p.Reload() != "" || p.Changes() != 1 {
			b.Fatalf("reason %q, %d changes", p.Reload(), p.Changes())
		}
	}
}

// BenchmarkPlanServerRemoved: a server removed from the middle backend of 10,000 x 10: the
// 5,000 backends below it move one line up (ParseAfter moves their sections, not reads them).
func BenchmarkPlanServerRemoved(b *testing.B) {
	old := bigConfig(-1)
	next := []byte(strings.Replace(string(old), "    server pod-5000-3 10.20.0.4:8080 check\n", "", 1))
	if len(next) == len(old) {
		b.Fatal("no server removed")
	}
	u := track(New(Options{Client: &fakeClient{}}))
	u.Reloaded(u.Plan(old, nil, nil))
	b.ReportAllocs()
	defer reportCPU(b, cputime.Process())
	for b.Loop() {
		p := u.Plan(next, nil, nil)
		if p.Reload() != "" || p.Changes() != 1 {
			b.Fatalf("reason %q, %d changes", p.Reload(), p.Changes())
		}
	}
}

// BenchmarkPlanNewBackend: a backend added to a rendering routed through a map (HAProxy 3.4:
// added at runtime), as an Ingress for a new Service is: 1,000 backends of 1 server (the Ingress
// example's benchmark), and 10,000 of 10.
func BenchmarkPlanNewBackend(b *testing.B) {
	config := func(n, servers int) []byte {
		var s strings.Builder
		s.WriteString("global\n    maxconn 50000\ndefaults web\n    mode http\n    balance roundrobin\n    default-server inter 2s fall 3 rise 2\n")
		s.WriteString("frontend fe\n    bind :80\n    use_backend %[req.hdr(host),lower,map(" + routes + ",be_default)]\n    default_backend be_default\nbackend be_default\n    http-request return status 404\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&s, "\nbackend be_%d\n", i)
			for j := 0; j < servers; j++ {
				fmt.Fprintf(&s, "    server pod-%d-%d 10.%d.%d.%d:8080 check\n", i, j, i/250, i%250, j+1)
			}
		}
		return []byte(s.String())
	}
	routesMap := func(n int) map[string][]byte {
		var s strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&s, "host-%05d.example.com/ be_%d\n", i, i)
		}
		return map[string][]byte{"hosts.map": []byte(s.String())}
	}
	for _, size := range []struct {
		backends, servers int
		middle            bool // added among the others (the ones below move), not last
		routed            bool // with the map, of one entry per backend (its new one last)
	}{{1000, 1, false, false}, {10000, 10, false, false}, {10000, 10, true, false}, {10000, 1, true, true}} {
		name := fmt.Sprintf("%dx%d", size.backends, size.servers)
		if size.middle {
			name += "-middle"
		}
		var oldMaps, nextMaps map[string][]byte
		if size.routed {
			name += "-map"
			oldMaps, nextMaps = routesMap(size.backends), routesMap(size.backends+1)
		}
		b.Run(name, func(b *testing.B) {
			old, next := config(size.backends, size.servers), config(size.backends+1, size.servers)
			if size.middle { // be_10000 written before be_5000
				last := next[len(old):]
				i := strings.Index(string(old), "\nbackend be_5000\n")
				next = []byte(string(old[:i]) + string(last) + string(old[i:]))
			}
			u := track(New(Options{Client: &fakeClient{}, MapsDir: mapsDir}))
			u.Reloaded(u.Plan(old, nil, oldMaps))
			u.live.version = parseVersion("3.4.7-1")
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			want := 1 + len(nextMaps) // the backend, and the map's new entry
			defer reportCPU(b, cputime.Process())
			for b.Loop() {
				p := u.Plan(next, nil, nextMaps)
				if p.Reload() != "" || p.Changes() != want {
					b.Fatalf("reason %q, %d changes", p.Reload(), p.Changes())
				}
			}
		})
	}
}

// BenchmarkPlanMapEdited: BenchmarkPlanMapChanged's change, the map looked up in trees only (as
// the Ingress example's routes.map): one entry deleted and one added at runtime, no swap, what
// HAProxy runs following each plan (the index of its keys derived from the one before).
func BenchmarkPlanMapEdited(b *testing.B) {
	var s strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&s, "ing-%05d.example.com/ web_svc-%05d_80\ning-%05d.example.com/api web_svc-%05d_80\n", i, i, i, (i+1)%10000)
	}
	versions := [2]map[string][]byte{files(map[string]string{"hosts.map": s.String()}),
		files(map[string]string{"hosts.map": strings.Replace(s.String(), "ing-05000.example.com/api web_svc-05001_80", "ing-05000.example.com/v2 web_svc-05001_80", 1)})}
	base := treeMapCfg("", "a 10.0.0.1:80 check")[0]
	u := track(New(Options{SSLDir: ssl, MapsDir: mapsDir, Client: &fakeClient{}}))
	u.Reloaded(u.Plan(base, nil, versions[0]))
	b.ReportAllocs()
	defer reportCPU(b, cputime.Process())
	i := 0
	for b.Loop() {
		i++
		p := u.Plan(base, nil, versions[i%2])
		if p.Reload() != "" || len(p.Commands()) != 2 {
			b.Fatal(p.Reload(), p.Commands())
		}
		u.live = p.target
	}
}

// ingressScale renders what examples/templates/ingress.yaml renders for n Ingresses, each of
// one host and one Service of two pods: a named defaults section listing the Ingresses served
// (comments), a frontend routing through routes.map, a backend per Service, and routes.map of
// a prefix and an exact entry per Ingress. edit changes it: "server" moves a pod of the middle
// Service, "map" a path of the middle Ingress, "backend" adds Ingress n (another Service).
func ingressScale(n int, edit string) (config []byte, maps map[string][]byte) {
	var c strings.Builder
	c.WriteString("global\n  log stdout format raw local0 notice\n  hard-stop-after 30s\n\ndefaults ingress\n  mode http\n  log global\n  option httplog\n  balance roundrobin\n  timeout connect 5s\n  timeout client 50s\n  timeout server 50s\n")
	ings := n
	if edit == "backend" {
		ings++
	}
	for i := range ings {
		fmt.Fprintf(&c, "# haproxy-sidecar: serves Ingress web/ing-%05d\n", i)
	}
	c.WriteString("\nfrontend http\n  bind :80\n  http-request set-var(txn.key) req.hdr(host),field(1,:),lower,concat(,txn.path)\n")
	c.WriteString("  http-request set-var(txn.backend) var(txn.key),concat(?),map(" + mapsDir + "/routes.map)\n")
	c.WriteString("  http-request set-var(txn.backend) var(txn.key),map_beg(" + mapsDir + "/routes.map) if !{ var(txn.backend) -m found }\n")
	c.WriteString("  use_backend %[var(txn.backend)] if { var(txn.backend) -m found }\n  default_backend be_notfound\n\nbackend be_notfound\n  http-request return status 404\n")
	for i := range ings {
		fmt.Fprintf(&c, "\nbackend be_web_svc-%05d_80\n", i)
		for j := range 2 {
			last := j + 1
			if edit == "server" && i == n/2 && j == 1 {
				last = 9
			}
			fmt.Fprintf(&c, "  server pod-%05d-%d-80 10.%d.%d.%d:80\n", i, j, i/250, i%250, last)
		}
	}
	var m strings.Builder
	m.WriteString("# HOST/PREFIX backend\n")
	path := func(i int) string {
		if edit == "map" && i == n/2 {
			return "/v2"
		}
		return ""
	}
	for i := range ings {
		fmt.Fprintf(&m, "ing-%05d.example.com%s/ be_web_svc-%05d_80\n", i, path(i), i)
	}
	m.WriteString("# HOST/PATH? backend\n")
	for i := range ings {
		fmt.Fprintf(&m, "ing-%05d.example.com%s? be_web_svc-%05d_80\n", i, path(i), i)
	}
	return []byte(c.String()), map[string][]byte{"routes.map": []byte(m.String())}
}

// BenchmarkPlanIngress10k: the plan of one change at 10,000 Ingresses of the Ingress example
// (ingressScale), on HAProxy 3.4: a pod moved, a path changed, an Ingress added. Each plan is
// made from a fresh copy of the rendering, as each sync renders one.
func BenchmarkPlanIngress10k(b *testing.B) {
	for _, edit := range []struct {
		name    string
		changes int
	}{{"server", 1}, {"map", 1}, {"backend", 2}} {
		b.Run(edit.name, func(b *testing.B) {
			old, oldMaps := ingressScale(10000, "")
			next, nextMaps := ingressScale(10000, edit.name)
			u := track(New(Options{Client: &fakeClient{}, MapsDir: mapsDir}))
			u.Reloaded(u.Plan(old, nil, oldMaps))
			u.live.version = parseVersion("3.4.7-1")
			b.SetBytes(int64(len(next)))
			b.ReportAllocs()
			var cpu time.Duration // the plans' only, not the copies'
			for b.Loop() {
				b.StopTimer()
				config, maps := slices.Clone(next), map[string][]byte{"routes.map": slices.Clone(nextMaps["routes.map"])}
				b.StartTimer()
				c0 := cputime.Process()
				p := u.Plan(config, nil, maps)
				cpu += cputime.Process() - c0
				if p.Reload() != "" || p.Changes() != edit.changes {
					b.Fatalf("reason %q, %d changes: %q", p.Reload(), p.Changes(), p.Commands())
				}
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
