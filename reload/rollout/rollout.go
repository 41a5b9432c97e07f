// Package rollout judges a canary: whether the one host given a new configuration first serves
// as well under it as the other hosts do under the previous one. The evidence is HAProxy's own
// counters (the runtime API's `show stat` and `show info`), sampled on each host when the watch
// starts and since. Judge is a pure function of those samples and the thresholds, tested from a
// table; sampling, pushing and rolling back are package dataplane's.
//
// What is compared, as deltas over the window:
//   - 5xx responses (hrsp_5xx) per request (req_tot), for each frontend, each backend and all
//     frontends together;
//   - connection errors (econ) per connection (stot), for each backend;
//   - servers whose health checks fail (they went down, chkdown, or are down with a failing
//     check_status) on the canary.
//
// A ratio counts only from Thresholds.MinRequests requests (or connections) on; the canary may
// exceed the other hosts' ratio for the same proxy by the threshold, so that a backend already
// failing everywhere fails no canary. A server whose checks fail on another host too is not the
// canary's doing either. Without another host to compare with, the thresholds are absolute.
package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Counters are what one frontend, backend or server counts (fields of `show stat`).
type Counters struct {
	Requests     int64  // req_tot: HTTP requests
	Sessions     int64  // stot: connections (sessions)
	Responses5xx int64  // hrsp_5xx
	ConnErrors   int64  // econ: connections to a server that failed
	CheckFails   int64  // chkfail: failed health checks while the server was up
	CheckDowns   int64  // chkdown: transitions from UP to DOWN
	Status       string // status: UP, DOWN, MAINT, "DOWN 1/2", "no check", ...
	CheckStatus  string // check_status: L4OK, L4CON, L7STS, "* L4CON" while a check runs, ...
}

// Sample is one host's counters at one moment.
type Sample struct {
	// PID is the HAProxy process that counts (show info): a new one (a reload, a restart)
	// counts from zero again.
	PID       int64
	Frontends map[string]Counters // by proxy name
	Backends  map[string]Counters // by proxy name
	Servers   map[string]Counters // by "backend/server"
}

// Window is one host's counters when the watch started and now.
type Window struct{ Start, Now Sample }

// Thresholds say how much worse than the other hosts the canary may do.
type Thresholds struct {
	// Max5xxRatio is how much higher the share of 5xx responses of a frontend or backend may
	// be on the canary than on the other hosts (0.05: five points). 1 turns it off.
	Max5xxRatio float64
	// MaxConnErrorRatio is the same for the share of a backend's connections that failed.
	MaxConnErrorRatio float64
	// MaxFailedChecks is how many servers may fail their health checks on the canary while
	// they pass on the other hosts.
	MaxFailedChecks int
	// MinRequests is the traffic below which a ratio tells nothing: a proxy with fewer
	// requests (connections, for connection errors) in the window is not judged by ratio, and
	// a window that ends with fewer requests on all the canary's frontends is Inconclusive.
	MinRequests int64
}

// Verdict is what the counters say.
type Verdict int

const (
	// Watching: nothing tripped yet; the window goes on.
	Watching Verdict = iota
	// Pass: the window is over and the canary did no worse than allowed.
	Pass
	// Fail: a threshold tripped: roll the canary back.
	Fail
	// Inconclusive: the counters cannot tell (too little traffic, the process restarted).
	Inconclusive
)

func (v Verdict) String() string {
	switch v {
	case Watching:
		return "watching"
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Inconclusive:
		return "inconclusive"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// The counters a Fail names (Judgement.Counter).
const (
	Counter5xx       = "hrsp_5xx"
	CounterConnError = "econ"
	CounterChecks    = "check_status"
)

// Judgement is a verdict and why.
type Judgement struct {
	Verdict Verdict
	// Counter is what tripped a Fail (Counter5xx, CounterConnError, CounterChecks).
	Counter string
	// Object is what it tripped on: "frontend fe", "backend be", "server be/s1".
	Object string
	// Reason says it in a sentence, for the log, the hold and the Event.
	Reason string
	// Requests is how many requests (or connections) the canary's frontends served in the
	// window.
	Requests int64
}

// Judge reads a canary's window against the other hosts' (baseline: one window per host that
// answered; none when there is no other host). final says the window is over: a canary that
// tripped nothing then passes, or is Inconclusive without enough traffic; before, it is
// Watching. A threshold that trips fails the canary at once.
func Judge(th Thresholds, canary Window, baseline []Window, final bool) Judgement {
	if canary.Start.PID != canary.Now.PID {
		return Judgement{Verdict: Inconclusive, Reason: fmt.Sprintf(
			"the canary's HAProxy process changed during the window (pid %d, then %d): its counters started again", canary.Start.PID, canary.Now.PID)}
	}
	c := diff(canary)
	var others []delta
	for _, w := range baseline {
		if w.Start.PID == w.Now.PID { // a host that restarted tells nothing
			others = append(others, diff(w))
		}
	}
	b := sum(others)
	traffic := c.traffic()

	if j, tripped := checks(th, c, others); tripped {
		j.Requests = traffic
		return j
	}
	for _, r := range []ratio{
		{counter: Counter5xx, flag: "--canary-max-5xx-ratio", max: th.Max5xxRatio, what: "5xx responses", per: "requests",
			num: func(c Counters) int64 { return c.Responses5xx }, den: func(c Counters) int64 { return c.Requests }},
		{counter: CounterConnError, flag: "--canary-max-conn-error-ratio", max: th.MaxConnErrorRatio, what: "failed connections (econ)", per: "connections",
			num: func(c Counters) int64 { return c.ConnErrors }, den: func(c Counters) int64 { return c.Sessions }, backendsOnly: true},
	} {
		if j, tripped := r.judge(th.MinRequests, c, b, len(others) > 0); tripped {
			j.Requests = traffic
			return j
		}
	}
	switch {
	case !final:
		return Judgement{Verdict: Watching, Requests: traffic}
	case traffic < th.MinRequests:
		return Judgement{Verdict: Inconclusive, Requests: traffic, Reason: fmt.Sprintf(
			"the canary's frontends served %d requests in the window, fewer than --canary-min-requests=%d: too few to tell", traffic, th.MinRequests)}
	}
	return Judgement{Verdict: Pass, Requests: traffic, Reason: fmt.Sprintf(
		"%d requests in the window, %s 5xx responses (%s), no threshold tripped", traffic, pct(c.allFrontends().ratio5xx()), baselinePct(b, len(others) > 0))}
}

// delta is a window's counters: how much each moved, with the statuses of now.
type delta struct {
	frontends, backends, servers map[string]Counters
}

func diff(w Window) delta {
	return delta{frontends: sub(w.Now.Frontends, w.Start.Frontends), backends: sub(w.Now.Backends, w.Start.Backends),
		servers: sub(w.Now.Servers, w.Start.Servers)}
}

// sub is now minus start for each object of now (one that appeared counts from zero); a
// counter that went back counts nothing.
func sub(now, start map[string]Counters) map[string]Counters {
	out := make(map[string]Counters, len(now))
	for k, n := range now {
		s := start[k]
		out[k] = Counters{
			Requests: pos(n.Requests - s.Requests), Sessions: pos(n.Sessions - s.Sessions),
			Responses5xx: pos(n.Responses5xx - s.Responses5xx), ConnErrors: pos(n.ConnErrors - s.ConnErrors),
			CheckFails: pos(n.CheckFails - s.CheckFails), CheckDowns: pos(n.CheckDowns - s.CheckDowns),
			Status: n.Status, CheckStatus: n.CheckStatus,
		}
	}
	return out
}

func pos(n int64) int64 { return max(n, 0) }

// sum adds the hosts' deltas up, object by object.
func sum(ds []delta) delta {
	out := delta{frontends: map[string]Counters{}, backends: map[string]Counters{}, servers: map[string]Counters{}}
	add := func(into, from map[string]Counters) {
		for k, c := range from {
			a := into[k]
			a.Requests += c.Requests
			a.Sessions += c.Sessions
			a.Responses5xx += c.Responses5xx
			a.ConnErrors += c.ConnErrors
			into[k] = a
		}
	}
	for _, d := range ds {
		add(out.frontends, d.frontends)
		add(out.backends, d.backends)
	}
	return out
}

// traffic is the requests the frontends served (connections, for a frontend in TCP mode).
func (d delta) traffic() int64 {
	var n int64
	for _, c := range d.frontends {
		n += max(c.Requests, c.Sessions)
	}
	return n
}

// allFrontends adds up the frontends.
func (d delta) allFrontends() Counters {
	var all Counters
	for _, c := range d.frontends {
		all.Requests += c.Requests
		all.Sessions += c.Sessions
		all.Responses5xx += c.Responses5xx
	}
	return all
}

func (c Counters) ratio5xx() float64 { return share(c.Responses5xx, c.Requests) }

// share is n/of, at most 1 (retries can fail more connections than there were sessions).
func share(n, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return min(float64(n)/float64(of), 1)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func baselinePct(b delta, have bool) string {
	if !have {
		return "no other host to compare with"
	}
	return pct(b.allFrontends().ratio5xx()) + " on the other hosts"
}

// ratio is one share the canary may not exceed the other hosts' by more than max.
type ratio struct {
	counter, flag, what, per string
	max                      float64
	num, den                 func(Counters) int64
	backendsOnly             bool
}

// judge finds the object whose share exceeds the other hosts' the most beyond r.max.
func (r ratio) judge(minReq int64, c, b delta, haveBaseline bool) (Judgement, bool) {
	type object struct {
		kind, name string
		can, base  Counters
		baseKnown  bool
	}
	var objs []object
	kinds := []struct {
		kind    string
		can, bs map[string]Counters
	}{{"frontend", c.frontends, b.frontends}, {"backend", c.backends, b.backends}}
	if r.backendsOnly {
		kinds = kinds[1:]
	}
	for _, k := range kinds {
		for _, name := range slices.Sorted(maps.Keys(k.can)) {
			base, ok := k.bs[name]
			objs = append(objs, object{kind: k.kind, name: name, can: k.can[name], base: base, baseKnown: ok})
		}
	}
	if !r.backendsOnly && len(c.frontends) > 1 {
		// Many small frontends, each below MinRequests, are judged together.
		objs = append(objs, object{kind: "frontends", name: "(all)", can: c.allFrontends(), base: b.allFrontends(), baseKnown: haveBaseline})
	}
	var worst *object
	var worstExcess float64
	for i := range objs {
		o := &objs[i]
		if r.den(o.can) < minReq {
			continue
		}
		excess := share(r.num(o.can), r.den(o.can))
		if o.baseKnown && r.den(o.base) >= minReq {
			excess -= share(r.num(o.base), r.den(o.base))
		}
		if excess > r.max && (worst == nil || excess > worstExcess) {
			worst, worstExcess = o, excess
		}
	}
	if worst == nil {
		return Judgement{}, false
	}
	what := worst.kind + " " + worst.name
	if worst.kind == "frontends" {
		what = "all frontends"
	}
	var against string
	switch {
	case !haveBaseline:
		against = fmt.Sprintf("no other host to compare with (at most %s: %s)", pct(r.max), r.flag)
	case !worst.baseKnown || r.den(worst.base) < minReq:
		against = fmt.Sprintf("too little traffic there on the other hosts to compare with (at most %s: %s)", pct(r.max), r.flag)
	default:
		against = fmt.Sprintf("against %s of %d on the other hosts (at most %.1f points more: %s)",
			pct(share(r.num(worst.base), r.den(worst.base))), r.den(worst.base), 100*r.max, r.flag)
	}
	return Judgement{Verdict: Fail, Counter: r.counter, Object: what, Reason: fmt.Sprintf("%s: %s of the %d %s of %s on the canary, %s",
		r.what, pct(share(r.num(worst.can), r.den(worst.can))), r.den(worst.can), r.per, what, against)}, true
}

// checks fails the canary when more than MaxFailedChecks servers fail their health checks
// on it and on no other host.
func checks(th Thresholds, c delta, others []delta) (Judgement, bool) {
	var failing, names []string
	for _, name := range slices.Sorted(maps.Keys(c.servers)) {
		s := c.servers[name]
		if !checkFailing(s) {
			continue
		}
		elsewhere := false
		for _, o := range others {
			if b, ok := o.servers[name]; ok && checkFailing(b) {
				elsewhere = true
				break
			}
		}
		if !elsewhere {
			names = append(names, name)
			failing = append(failing, fmt.Sprintf("%s (%s)", name, describe(s)))
		}
	}
	if len(failing) <= th.MaxFailedChecks {
		return Judgement{}, false
	}
	where := "and on no other host"
	if len(others) == 0 {
		where = "(no other host to compare with)"
	}
	shown := failing
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(failing)-5))
	}
	return Judgement{Verdict: Fail, Counter: CounterChecks, Object: "server " + names[0],
		Reason: fmt.Sprintf("health checks: %d server(s) fail theirs on the canary %s: %s (at most %d: --canary-max-failed-checks)",
			len(failing), where, strings.Join(shown, ", "), th.MaxFailedChecks)}, true
}

// checkFailing says a server's health checks fail: it went down in the window, or it is down
// with a failing check (not one in maintenance, nor one without checks).
func checkFailing(s Counters) bool {
	if s.CheckDowns > 0 {
		return true
	}
	return strings.HasPrefix(s.Status, "DOWN") && checkFailed(s.CheckStatus)
}

// checkFailed says a check_status is a failure: any but the successes (L4OK, L6OK, L7OK,
// L7OKC, PROCOK), the initial ones (INI, UNK) and none.
func checkFailed(status string) bool {
	st := strings.TrimPrefix(strings.TrimSpace(status), "* ")
	return st != "" && st != "INI" && st != "UNK" && !strings.Contains(st, "OK")
}

func describe(s Counters) string {
	parts := []string{s.Status}
	if st := strings.TrimPrefix(s.CheckStatus, "* "); st != "" {
		parts = append(parts, st)
	}
	if s.CheckDowns > 0 {
		parts = append(parts, fmt.Sprintf("went down %d time(s)", s.CheckDowns))
	}
	return strings.Join(parts, ", ")
}
