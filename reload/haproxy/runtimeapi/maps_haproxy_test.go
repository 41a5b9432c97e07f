package runtimeapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// mapRig is a real HAProxy whose frontend answers with what its maps give for the request:
// hosts.map through map (exact) and map_reg, paths.map through map_beg (longest prefix) and
// map_reg (first match in file order).
type mapRig struct {
	dir, maps, cfgPath, http, stats string
	proc                            *haproxytest.Process
}

func newMapRig(t testing.TB) *mapRig {
	haproxytest.Binary(t)
	dir := haproxytest.ShortTempDir(t)
	r := &mapRig{dir: dir, maps: filepath.Join(dir, "maps"), cfgPath: filepath.Join(dir, "haproxy.cfg"),
		stats: filepath.Join(dir, "stats.sock"), http: fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))}
	if err := os.Mkdir(r.maps, 0o700); err != nil {
		t.Fatal(err)
	}
	return r
}

// config is the configuration; global and frontend are extra lines for those sections.
func (r *mapRig) config(global, frontend string) []byte {
	return r.answering(global, frontend, fmt.Sprintf("host=%%[req.hdr(host),lower,map(%[1]s/hosts.map,none)] reg=%%[req.hdr(host),lower,map_reg(%[1]s/hosts.map,none)] path=%%[path,map_beg(%[1]s/paths.map,none)] preg=%%[path,map_reg(%[1]s/paths.map,none)]", r.maps))
}

// answering is the configuration whose frontend answers every request with the log-format
// string answer; global and frontend are extra lines for those sections.
func (r *mapRig) answering(global, frontend, answer string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    stats socket %s mode 600 level admin\n    hard-stop-after 5s\n%s\n", r.stats, global)
	b.WriteString("defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n")
	fmt.Fprintf(&b, "frontend fe\n    bind %s\n%s", r.http, frontend)
	fmt.Fprintf(&b, "    http-request return status 200 content-type text/plain lf-string \"%s\"\n", answer)
	return []byte(b.String())
}

// write puts the files on disk as the generation swap would.
func (r *mapRig) write(t testing.TB, config []byte, maps map[string][]byte) {
	t.Helper()
	entries, _ := os.ReadDir(r.maps)
	for _, e := range entries {
		os.Remove(filepath.Join(r.maps, e.Name()))
	}
	for name, content := range maps {
		if err := os.WriteFile(filepath.Join(r.maps, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r.cfgPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
}

// get answers a request for host and path.
func (r *mapRig) get(host, path string) (string, error) {
	req, err := http.NewRequest("GET", "http://"+r.http+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// answers checks what the frontend answers for host and path: want is the answer's fields
// that must be there ("host=be_a").
func (r *mapRig) answers(t testing.TB, host, path string, want ...string) {
	t.Helper()
	got, err := r.get(host, path)
	if err != nil {
		t.Fatalf("%s%s: %v", host, path, err)
	}
	for _, w := range want {
		if !strings.Contains(" "+got+" ", " "+w+" ") {
			t.Fatalf("%s%s answered %q, want %q", host, path, got, w)
		}
	}
}

func (r *mapRig) updater(t testing.TB, via string) *tracked {
	opts := Options{Client: &Socket{Path: r.socket(via)}, MapsDir: r.maps, Logger: slog.New(slog.DiscardHandler)}
	if via == "master socket" {
		opts.Prefix = "@1 "
	}
	return track(New(opts))
}

// socket is the path of the master socket or of the stats socket.
func (r *mapRig) socket(via string) string {
	if via == "master socket" {
		return r.proc.MasterSocket
	}
	return r.stats
}

func mapFiles(kv ...string) map[string][]byte {
	out := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []byte(kv[i+1])
	}
	return out
}

// TestMapSwapsOnRealHAProxy replaces map entries on a real HAProxy, through the master socket
// and a stats socket: an entry changed, added, removed; file order kept for first-match
// lookups; values with the characters a command line would interpret; a map emptied; all with
// no reload, and a reload of the files written loads the same.
func TestMapSwapsOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	for _, via := range []string{"master socket", "stats socket"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			r := newMapRig(t)
			cfg := r.config("", "")
			maps := mapFiles("hosts.map", "a.example be_a\nb.example be_b\n", "paths.map", "/api be_api\n/api/v2 be_v2\n")
			r.write(t, cfg, maps)
			r.proc = haproxytest.Start(t, r.cfgPath)
			u := r.updater(t, via)
			u.Reloaded(u.Plan(cfg, nil, maps))
			r.answers(t, "a.example", "/api/v2/x", "host=be_a", "reg=be_a", "path=be_v2", "preg=be_api")

			apply := func(t *testing.T, next map[string][]byte) {
				t.Helper()
				p := u.Plan(cfg, nil, next)
				if p.Reload() != "" {
					t.Fatalf("reload asked: %s", p.Reload())
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatal(err)
				}
				maps = next
			}
			t.Run("an entry changed, one added, one removed: every converter of the file sees them", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", "a.example be_x\nc.example be_c\n", "paths.map", string(maps["paths.map"])))
				r.answers(t, "a.example", "/", "host=be_x", "reg=be_x")
				r.answers(t, "C.Example", "/", "host=be_c", "reg=be_c")
				r.answers(t, "b.example", "/", "host=none", "reg=none")
			})
			t.Run("file order is kept for first-match lookups (map_reg), longest prefix for map_beg", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", string(maps["hosts.map"]), "paths.map", "/api/v2 be_v2\n/api be_api\n"))
				r.answers(t, "a.example", "/api/v2/x", "path=be_v2", "preg=be_v2")
				r.answers(t, "a.example", "/api/v1", "path=be_api", "preg=be_api")
				apply(t, mapFiles("hosts.map", string(maps["hosts.map"]), "paths.map", "/api be_api\n/api/v2 be_v2\n"))
				r.answers(t, "a.example", "/api/v2/y", "path=be_v2", "preg=be_api")
			})
			t.Run("values as written, the CLI's special characters included", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", "# hosts\n  a.example \t be;x#y\\z   \nc.example $HOME\"q\"'s'\n", "paths.map", string(maps["paths.map"])))
				r.answers(t, "a.example", "/", `host=be;x#y\z`)
				r.answers(t, "c.example", "/", `host=$HOME"q"'s'`)
			})
			t.Run("a map emptied", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", "# none\n", "paths.map", string(maps["paths.map"])))
				r.answers(t, "a.example", "/", "host=none", "reg=none")
			})
			t.Run("from an empty map: no result cached from the empty map is served after", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", string(maps["hosts.map"]), "paths.map", "# none\n"))
				// Requests between the last add and the commit (new connections, so every
				// thread gets some) cache "no match" from the empty map.
				var mu sync.Mutex
				var early []string
				commits := 0
				proxy := newCLIProxy(t, r.socket(via), func(line string) {
					if !strings.Contains(line, "commit map") {
						return
					}
					mu.Lock()
					defer mu.Unlock()
					commits++
					for i := 0; i < 20; i++ {
						if got, err := r.get("a.example", "/cache/x"); err != nil || !strings.Contains(got, "path=none preg=none") {
							early = append(early, fmt.Sprintf("%q (%v)", got, err))
						}
					}
				})
				client := u.opts.Client
				u.opts.Client = &Socket{Path: proxy.path}
				defer func() { u.opts.Client = client }()
				apply(t, mapFiles("hosts.map", string(maps["hosts.map"]), "paths.map", "/cache be_cache\n"))
				mu.Lock()
				if commits != 1 {
					t.Fatalf("%d commits seen, want 1", commits)
				}
				if len(early) > 0 {
					t.Fatalf("before the commit, the new entry was served already: %s", early[0])
				}
				mu.Unlock()
				for i := 0; i < 20; i++ {
					r.answers(t, "a.example", "/cache/x", "path=be_cache", "preg=be_cache")
				}
			})
			t.Run("2,000 entries", func(t *testing.T) {
				apply(t, mapFiles("hosts.map", hostsMap(2000), "paths.map", string(maps["paths.map"])))
				r.answers(t, "host-00000.example.com", "/", "host=be_000")
				r.answers(t, "host-01999.example.com", "/", "host=be_099")
				out, err := u.opts.Client.Command(ctx, u.opts.Prefix+"show map "+r.maps+"/hosts.map")
				if err != nil || strings.Count(out, "\n") != 2001 {
					t.Fatalf("show map: %d lines (%v), want 2,000 entries", strings.Count(out, "\n")-1, err)
				}
			})
			t.Run("3,000 entries in many payloads, all on one connection", func(t *testing.T) {
				proxy := newCLIProxy(t, r.socket(via), nil)
				client := u.opts.Client
				u.opts.Client = &Socket{Path: proxy.path}
				defer func() { u.opts.Client = client }()
				p := u.Plan(cfg, nil, mapFiles("hosts.map", hostsMap(3000), "paths.map", string(maps["paths.map"])))
				if n := strings.Count(strings.Join(p.Commands(), "\n"), "add map"); n < 5 {
					t.Fatalf("%d payloads for 3,000 entries", n)
				}
				apply(t, mapFiles("hosts.map", hostsMap(3000), "paths.map", string(maps["paths.map"])))
				if n := proxy.conns.Load(); n != 1 {
					t.Fatalf("%d connections to HAProxy's CLI, want 1", n)
				}
				r.answers(t, "host-02999.example.com", "/", "host=be_099")
				r.answers(t, "host-00000.example.com", "/", "host=be_000")
			})
			t.Run("no reload happened, and a reload of the files loads the same", func(t *testing.T) {
				proc, err := reload.ParseProc(r.proc.ShowProc(t))
				if err != nil || proc.Reloads != 0 {
					t.Fatalf("reloads %d (%v), want 0", proc.Reloads, err)
				}
				before, _ := r.get("host-01234.example.com", "/api/v2")
				r.write(t, cfg, maps)
				if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
					t.Fatal(err)
				}
				if after, _ := r.get("host-01234.example.com", "/api/v2"); after != before || before == "" {
					t.Fatalf("before the reload %q, after %q", before, after)
				}
			})
		})
	}
}

// treeConfig is a configuration whose frontend reads hosts.map through map (exact) and
// paths.map through map_beg (longest prefix) only: trees, whose one entry changed is sent
// alone (mapedit.go).
func (r *mapRig) treeConfig() []byte {
	return r.answering("", "", fmt.Sprintf("host=%%[req.hdr(host),lower,map(%[1]s/hosts.map,none)] path=%%[path,map_beg(%[1]s/paths.map,none)]", r.maps))
}

// TestMapEntryEditsOnRealHAProxy: on maps every lookup of which is a tree's, an entry added, a
// value changed and an entry deleted go live as that one command (add map, set map, del map),
// through the master socket and a stats socket, with no reload; a longer prefix added wins
// over a shorter one (map_beg), and a reload of the files written loads the same.
func TestMapEntryEditsOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	for _, via := range []string{"master socket", "stats socket"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			r := newMapRig(t)
			cfg := r.treeConfig()
			live := mapFiles("hosts.map", hostsMap(500), "paths.map", "/api be_api\n/web be_web\n")
			r.write(t, cfg, live)
			r.proc = haproxytest.Start(t, r.cfgPath)
			u := r.updater(t, via)
			u.Reloaded(u.Plan(cfg, nil, live))
			r.answers(t, "host-00007.example.com", "/api/v2/x", "host=be_007", "path=be_api")

			edit := func(t *testing.T, name, content string, want ...string) {
				t.Helper()
				next := maps.Clone(live)
				next[name] = []byte(content)
				p := u.Plan(cfg, nil, next)
				if p.Reload() != "" {
					t.Fatalf("reload asked: %s", p.Reload())
				}
				if got := p.Commands(); !slices.Equal(got, want) {
					t.Fatalf("commands %q, want %q", got, want)
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatal(err)
				}
				live = next
			}
			hosts, paths := r.maps+"/hosts.map", r.maps+"/paths.map"
			t.Run("an entry added", func(t *testing.T) {
				edit(t, "hosts.map", string(live["hosts.map"])+"new.example.com be_new\n", "add map "+hosts+" new.example.com be_new")
				r.answers(t, "New.Example.com", "/", "host=be_new")
				r.answers(t, "host-00499.example.com", "/", "host=be_099")
			})
			t.Run("a value changed", func(t *testing.T) {
				edit(t, "hosts.map", strings.Replace(string(live["hosts.map"]), "host-00007.example.com be_007\n", "host-00007.example.com be_seven\n", 1),
					"set map "+hosts+" host-00007.example.com be_seven")
				r.answers(t, "host-00007.example.com", "/", "host=be_seven")
				r.answers(t, "host-00008.example.com", "/", "host=be_008")
			})
			t.Run("an entry deleted", func(t *testing.T) {
				edit(t, "hosts.map", strings.Replace(string(live["hosts.map"]), "host-00009.example.com be_009\n", "", 1),
					"del map "+hosts+" host-00009.example.com")
				r.answers(t, "host-00009.example.com", "/", "host=none")
				r.answers(t, "host-00010.example.com", "/", "host=be_010")
			})
			t.Run("a longer prefix added wins over a shorter one", func(t *testing.T) {
				edit(t, "paths.map", "/api be_api\n/api/v2 be_v2\n/web be_web\n", "add map "+paths+" /api/v2 be_v2")
				r.answers(t, "a.example", "/api/v2/x", "path=be_v2")
				r.answers(t, "a.example", "/api/v1", "path=be_api")
			})
			t.Run("two values changed: two commands", func(t *testing.T) {
				edit(t, "paths.map", "/api be_x\n/api/v2 be_v2\n/web be_y\n", "set map "+paths+" /api be_x", "set map "+paths+" /web be_y")
				r.answers(t, "a.example", "/web/", "path=be_y")
				r.answers(t, "a.example", "/api/", "path=be_x")
			})
			t.Run("a path moved: the new one added, then the old one deleted", func(t *testing.T) {
				edit(t, "paths.map", "/api be_x\n/api/v3 be_v2\n/web be_y\n", "add map "+paths+" /api/v3 be_v2", "del map "+paths+" /api/v2")
				r.answers(t, "a.example", "/api/v3/x", "path=be_v2")
				r.answers(t, "a.example", "/api/v2/x", "path=be_x") // the shorter prefix again
			})
			t.Run("more entries changed than commands allowed: a swap", func(t *testing.T) {
				next := maps.Clone(live)
				next["hosts.map"] = []byte(strings.ReplaceAll(string(live["hosts.map"]), " be_0", " be_x0"))
				p := u.Plan(cfg, nil, next)
				if cmds := strings.Join(p.Commands(), "\n"); !strings.Contains(cmds, "prepare map "+hosts) {
					t.Fatalf("commands %q, want a swap", cmds)
				}
				if err := u.Apply(ctx, p); err != nil {
					t.Fatal(err)
				}
				live = next
				r.answers(t, "host-00042.example.com", "/", "host=be_x042")
				r.answers(t, "new.example.com", "/", "host=be_new")
			})
			t.Run("no reload happened, and a reload of the files loads the same", func(t *testing.T) {
				proc, err := reload.ParseProc(r.proc.ShowProc(t))
				if err != nil || proc.Reloads != 0 {
					t.Fatalf("reloads %d (%v), want 0", proc.Reloads, err)
				}
				var before []string
				for _, h := range []string{"new.example.com", "host-00007.example.com", "host-00009.example.com"} {
					got, _ := r.get(h, "/api/v2/x")
					before = append(before, got)
				}
				r.write(t, cfg, live)
				if err := (&reload.MasterSocket{Path: r.proc.MasterSocket, Timeout: 20 * time.Second}).Reload(ctx); err != nil {
					t.Fatal(err)
				}
				for i, h := range []string{"new.example.com", "host-00007.example.com", "host-00009.example.com"} {
					if after, _ := r.get(h, "/api/v2/x"); after != before[i] || after == "" {
						t.Fatalf("%s: before the reload %q, after %q", h, before[i], after)
					}
				}
			})
		})
	}
}

// hostsMap is a map of n hosts over 100 backends.
func hostsMap(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "host-%05d.example.com be_%03d\n", i, i%100)
	}
	return b.String()
}

// TestMapSwapRefusedOnRealHAProxy: what a swap cannot do comes back as an error (the pipeline
// then reloads), the map HAProxy serves left as it was.
func TestMapSwapRefusedOnRealHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	ctx := context.Background()
	r := newMapRig(t)
	// ips.map holds networks (map_ip); blocked.map is an ACL pattern file (-f); unused.map is
	// named nowhere; a small tune.bufsize makes small payloads.
	cfg := r.config("    tune.bufsize 4096\n", fmt.Sprintf("    http-request set-header X-Net %%[src,map_ip(%[1]s/ips.map,none)]\n    acl blocked req.hdr(host) -f %[1]s/blocked.map\n    http-request deny if blocked\n", r.maps))
	maps := mapFiles("hosts.map", "a.example be_a\n", "paths.map", "/ be_root\n", "ips.map", "127.0.0.0/8 local\n", "blocked.map", "bad.example x\n", "unused.map", "k v\n")
	r.write(t, cfg, maps)
	r.proc = haproxytest.Start(t, r.cfgPath)
	u := r.updater(t, "master socket")
	with := func(name, content string) map[string][]byte {
		next := map[string][]byte{}
		for k, v := range maps {
			next[k] = v
		}
		next[name] = []byte(content)
		return next
	}
	for _, c := range []struct {
		name, file, content, err string
	}{
		{"an entry HAProxy cannot parse (map_ip)", "ips.map", "127.0.0.0/8 local\nnot-an-ip x\n", "not-an-ip"},
		{"a map loaded as an ACL pattern file", "blocked.map", "worse.example x\n", "ACL pattern file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u.Reloaded(u.Plan(cfg, nil, maps))
			p := u.Plan(cfg, nil, with(c.file, c.content))
			if p.Reload() != "" {
				t.Fatal(p.Reload())
			}
			err := u.Apply(ctx, p)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			t.Log(err)
			r.answers(t, "a.example", "/", "host=be_a", "path=be_root")
			if out, _ := r.proc.Command("@1 show map " + r.maps + "/ips.map"); strings.Count(out, "\n") != 2 {
				t.Fatalf("ips.map in HAProxy:\n%s", out)
			}
		})
	}
	t.Run("a map HAProxy did not load: nothing to send", func(t *testing.T) {
		u.Reloaded(u.Plan(cfg, nil, maps))
		if err := u.Apply(ctx, u.Plan(cfg, nil, with("unused.map", "k w\n"))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a large map in payloads that fit a small buffer", func(t *testing.T) {
		u.Reloaded(u.Plan(cfg, nil, maps))
		p := u.Plan(cfg, nil, with("hosts.map", hostsMap(1000)))
		if n := strings.Count(strings.Join(p.Commands(), "\n"), "add map"); n < 15 {
			t.Fatalf("%d payloads for 30 kB with tune.bufsize 4096", n)
		}
		if err := u.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		r.answers(t, "host-00999.example.com", "/", "host=be_099")
	})
}

// BenchmarkMapSwap: a map of 1,000 and of 10,000 entries (Ingress hosts) replaced on a real
// HAProxy through the master socket, from the plan to the commit: used by map (exact match,
// the usual routing), and used by map and map_reg (HAProxy compiles every entry as a regular
// expression too).
func BenchmarkMapSwap(b *testing.B) {
	for _, reg := range []bool{false, true} {
		for _, n := range []int{1000, 10000} {
			name := fmt.Sprintf("%d entries, map", n)
			if reg {
				name += " and map_reg"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				r := newMapRig(b)
				cfg := r.config("", "")
				if !reg {
					cfg = []byte(strings.Replace(string(cfg), " reg=%[req.hdr(host),lower,map_reg("+r.maps+"/hosts.map,none)]", "", 1))
				}
				maps := mapFiles("hosts.map", hostsMap(n), "paths.map", "/ be_root\n")
				r.write(b, cfg, maps)
				r.proc = haproxytest.Start(b, r.cfgPath)
				u := r.updater(b, "master socket")
				u.Reloaded(u.Plan(cfg, nil, maps))
				i := 0
				for b.Loop() {
					i++
					next := mapFiles("hosts.map", hostsMap(n)+fmt.Sprintf("extra-%d.example be_x\n", i), "paths.map", "/ be_root\n")
					p := u.Plan(cfg, nil, next)
					if err := u.Apply(ctx, p); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				r.answers(b, fmt.Sprintf("extra-%d.example", i), "/", "host=be_x")
			})
		}
	}
}
