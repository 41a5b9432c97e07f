package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
)

// change is a kind of change: each of its writes through the API, and whether an answer
// through HAProxy shows it.
type change struct {
	what  string // its row in the table
	key   string // its name for --changes-profile-kind
	order int    // when it runs: a route is deleted once the new ones are there
	write func(c int) error
	shown func(c int) bool
}

// kindsOfChange are the four kinds, in the table's order.
func (b *bench) kindsOfChange() []change {
	k := b.kube
	newRoute := func(c int) int { return b.n + c } // route, Service and backend
	cs := []change{{
		what:  "a new route to a new Service -> 200 from it",
		key:   "new",
		order: 0,
		// As one `kubectl apply` of the three would: timed from the return of the last.
		write: func(c int) error {
			i := newRoute(c)
			if err := k.Apply(svcName(i), objects(service(svcName(i), b.port), endpointSlice(svcName(i), b.port, endpoint{podName(i), addr(i)})), 1); err != nil {
				return err
			}
			name := b.newRouteName(c)
			return k.Apply(name, objects(b.kind.route(name, name+".example.com", []rule{{"/", svcName(i)}})), 1)
		},
		shown: func(c int) bool { return b.proxy.Get(b.newRouteName(c)+".example.com", "/") == svcName(newRoute(c)) },
	}, {
		what:  "a path changed -> served by its backend",
		key:   "path",
		order: 2,
		// /api becomes /vC, still to Service i+1; before, / sends /vC to Service i.
		write: func(c int) error {
			i := b.pathRoute(c)
			return k.Apply(b.routeName(i), objects(b.kind.route(b.routeName(i), b.host(i),
				[]rule{{"/", svcName(i)}, {fmt.Sprintf("/v%d", c+1), svcName((i + 1) % b.n)}})), 1)
		},
		shown: func(c int) bool {
			i := b.pathRoute(c)
			return b.proxy.Get(b.host(i), fmt.Sprintf("/v%d/x", c+1)) == svcName((i+1)%b.n)
		},
	}, {
		what:  "a route deleted -> 404",
		key:   "delete",
		order: 1,
		write: func(c int) error { return k.Remove(b.newRouteName(c)) },
		shown: func(c int) bool { return strings.HasPrefix(b.proxy.Get(b.newRouteName(c)+".example.com", "/"), "404") },
	}, {
		what:  "a backend's pod added -> a request reaches it",
		key:   "pod",
		order: 3,
		// The EndpointSlice rewritten with a second endpoint, in etcd: timed from the put's return.
		write: func(c int) error {
			j := b.podService(c)
			return k.Apply(svcName(j)+"-slice", objects(endpointSlice(svcName(j), b.port, endpoint{podName(j), addr(j)}, b.addedPod(c))), 1)
		},
		shown: func(c int) bool { return b.proxy.Get(b.host(b.podService(c)), "/") == b.addedPod(c).pod },
	}}
	return cs
}

// byOrder is the indices of cs in the order they run.
func byOrder(cs []change) []int {
	idx := make([]int, len(cs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cs[a].order - cs[b].order })
	return idx
}

// result is what one kind of change measured.
type result struct {
	what    string
	took    []time.Duration
	at      []time.Time          // when each change's write returned (took[i] runs from at[i])
	reloads int                  // HAProxy's
	updates map[string]float64   // the sidecar's runtime-API updates, by kind
	renders map[string]float64   // the sidecar's renders, by result
	ahead   map[string]float64   // the sidecar's renders ahead (--render-ahead), by result
	toLive  time.Duration        // the sidecar's own mean change -> live (haproxy_sidecar_change_to_live_seconds)
	rss     int                  // MB, after the last change
	stages  map[string][]float64 // with --stages: ms by stage, of the syncs that changed what HAProxy runs
	idle    int                  // with --stages: the syncs that changed nothing
}

// measure makes the changes of one kind, one at a time: each written, timed until shown,
// then the sidecar settled and quiet (quiet).
func (b *bench) measure(ch change) (*result, error) {
	if err := b.quiet(); err != nil {
		return nil, err
	}
	r := &result{what: ch.what}
	reloads0, err := b.rig.Reloads()
	if err != nil {
		return nil, fmt.Errorf("read HAProxy's reloads: %w", err)
	}
	updates0, renders0 := b.samples("haproxy_sidecar_runtime_updates_total"), b.samples("haproxy_sidecar_renders_total")
	ahead0 := b.samples("haproxy_sidecar_renders_ahead_total")
	liveSum0, liveN0 := b.proxy.Metric("haproxy_sidecar_change_to_live_seconds_sum"), b.proxy.Metric("haproxy_sidecar_change_to_live_seconds_count")
	log0 := fileSize(b.logPath())
	if b.profile != "" && ch.key == b.profileKind {
		// From the first write to the sidecar quiet after the last: each change's render, its
		// status writes and the render they bring back.
		stop := b.proxy.ProfileCPU(b.profile)
		defer func() {
			if err := stop(); err != nil {
				log.Printf("--changes-profile: %v", err)
			}
		}()
	}
	if b.trace != "" && ch.key == b.profileKind {
		// A trace cannot be stopped early: it runs its time, past the last change if need be.
		traced := b.proxy.Trace(b.trace, b.traceFor)
		defer func() {
			if err := traced(); err != nil {
				log.Printf("--changes-trace: %v", err)
			}
		}()
	}
	for c := range b.changes {
		if err := ch.write(c); err != nil {
			return nil, fmt.Errorf("%s, change %d: %w", ch.what, c, err)
		}
		t0 := time.Now()
		if err := benchrig.WaitUntil(fmt.Sprintf("%s, change %d", ch.what, c), changeDeadline, func() bool { return ch.shown(c) }); err != nil {
			return nil, err
		}
		r.took = append(r.took, time.Since(t0))
		r.at = append(r.at, t0)
		if err := b.quiet(); err != nil {
			return nil, err
		}
	}
	reloads1, err := b.rig.Reloads()
	if err != nil {
		return nil, fmt.Errorf("read HAProxy's reloads: %w", err)
	}
	r.reloads = reloads1 - reloads0
	r.updates = delta(b.samples("haproxy_sidecar_runtime_updates_total"), updates0)
	r.renders = delta(b.samples("haproxy_sidecar_renders_total"), renders0)
	r.ahead = delta(b.samples("haproxy_sidecar_renders_ahead_total"), ahead0)
	if n := b.proxy.Metric("haproxy_sidecar_change_to_live_seconds_count") - liveN0; n > 0 {
		r.toLive = time.Duration((b.proxy.Metric("haproxy_sidecar_change_to_live_seconds_sum") - liveSum0) / n * float64(time.Second))
	}
	r.rss = b.proxy.RSS()
	if b.stages {
		r.stages, r.idle = syncStages(b.logPath(), log0)
	}
	return r, nil
}

// quiet waits until the sidecar has settled (Settled) and then been idle: b.gap at least since,
// and at most 20 ms of CPU used in the last 300 ms. Once a change is live the sidecar writes
// its status (looked at every 500 ms), which comes back from the API as a change of the objects
// and is rendered again, everything; the next change waits until that is over, so that each is
// measured alone. (Its renders counter moves only at the end of a render: it cannot say.)
func (b *bench) quiet() error {
	if err := b.proxy.Settled(); err != nil {
		return err
	}
	type reading struct {
		at  time.Time
		cpu time.Duration
	}
	start := time.Now()
	var rs []reading
	return benchrig.WaitUntil("the sidecar idle", 2*time.Minute, func() bool {
		time.Sleep(20 * time.Millisecond)
		now := reading{time.Now(), b.proxy.CPU()}
		rs = append(rs, now)
		// The newest reading at least 300 ms old is rs[0].
		for len(rs) > 1 && now.at.Sub(rs[1].at) >= 300*time.Millisecond {
			rs = rs[1:]
		}
		return time.Since(start) >= b.gap && now.at.Sub(rs[0].at) >= 300*time.Millisecond && now.cpu-rs[0].cpu <= 20*time.Millisecond
	})
}

// samples are the sidecar's samples of a metric (Samples); none when it cannot be read.
func (b *bench) samples(name string) map[string]float64 {
	s, err := benchrig.Samples(b.proxy.Metrics, name)
	if err != nil {
		return map[string]float64{}
	}
	return s
}

// delta is after less before, for the samples that moved.
func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logLines calls each for the JSON lines of the sidecar's log from offset on.
func logLines(path string, offset int64, each func(line map[string]any)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			each(line)
		}
	}
}

// statusWritten is how many objects the sidecar has written the status of, and when it wrote
// the last (its log's "status written").
func (b *bench) statusWritten() (int, time.Time) {
	objs := map[string]bool{}
	var last time.Time
	logLines(b.logPath(), 0, func(line map[string]any) {
		if line["msg"] != "status written" {
			return
		}
		o, _ := line["object"].(string)
		objs[o] = true
		if t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(line["time"])); err == nil && t.After(last) {
			last = t
		}
	})
	return len(objs), last
}

// syncStages are the durations in ms of each stage of the syncs the sidecar logged from
// offset on ("sync stages", at debug level) that changed what HAProxy runs, by stage, and how
// many changed nothing.
func syncStages(path string, offset int64) (map[string][]float64, int) {
	out, idle := map[string][]float64{}, 0
	logLines(path, offset, func(line map[string]any) {
		if line["msg"] != "sync stages" {
			return
		}
		if line["action"] == "nothing" {
			idle++
			return
		}
		for _, stage := range stageNames {
			if v, ok := line[stage].(float64); ok {
				out[stage] = append(out[stage], v*1000)
			}
		}
	})
	return out, idle
}

var stageNames = []string{"read", "build", "plan", "apply"}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
