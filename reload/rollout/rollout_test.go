package rollout

import (
	"strings"
	"testing"
)

// fe, be and srv build one object's counters; host builds a sample.
func fe(req, r5xx int64) Counters { return Counters{Requests: req, Sessions: req, Responses5xx: r5xx} }

func be(req, r5xx, sessions, econ int64) Counters {
	return Counters{Requests: req, Responses5xx: r5xx, Sessions: sessions, ConnErrors: econ}
}

func srv(status, check string, downs int64) Counters {
	return Counters{Status: status, CheckStatus: check, CheckDowns: downs}
}

type host struct {
	pid       int64
	frontends map[string]Counters
	backends  map[string]Counters
	servers   map[string]Counters
}

func (h host) sample() Sample {
	pid := h.pid
	if pid == 0 {
		pid = 100
	}
	return Sample{PID: pid, Frontends: h.frontends, Backends: h.backends, Servers: h.servers}
}

// win is a window from an empty start (a fresh worker) to now.
func win(now host) Window {
	start := host{pid: now.pid}
	return Window{Start: start.sample(), Now: now.sample()}
}

var th = Thresholds{Max5xxRatio: 0.05, MaxConnErrorRatio: 0.05, MaxFailedChecks: 0, MinRequests: 20}

func TestJudge(t *testing.T) {
	healthy := win(host{frontends: map[string]Counters{"fe": fe(100, 1)}, backends: map[string]Counters{"be": be(100, 1, 100, 0)},
		servers: map[string]Counters{"be/s1": srv("UP", "L4OK", 0)}})
	tests := []struct {
		name     string
		canary   Window
		baseline []Window
		final    bool
		want     Verdict
		counter  string
		object   string
		reason   []string // parts the reason must hold
	}{
		{name: "healthy, window not over: watching", canary: healthy, baseline: []Window{healthy}, want: Watching},
		{name: "healthy, window over: pass", canary: healthy, baseline: []Window{healthy}, final: true, want: Pass,
			reason: []string{"100 requests", "1.0% 5xx"}},
		{name: "a frontend answering 503 to everything: fail at once, before the window ends",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(40, 40)}}),
			baseline: []Window{healthy, healthy}, want: Fail, counter: Counter5xx, object: "frontend fe",
			reason: []string{"100.0% of the 40 requests of frontend fe", "against 1.0% of 200 on the other hosts", "--canary-max-5xx-ratio"}},
		{name: "5xx within the threshold above the others: pass",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(100, 5)}}),
			baseline: []Window{healthy}, final: true, want: Pass},
		{name: "5xx just beyond the threshold above the others: fail",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(100, 7)}}),
			baseline: []Window{healthy}, want: Fail, counter: Counter5xx},
		{name: "a backend failing as much on the other hosts: not the canary's doing",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(100, 50)}, backends: map[string]Counters{"be": be(100, 50, 100, 0)}}),
			baseline: []Window{win(host{frontends: map[string]Counters{"fe": fe(200, 100)}, backends: map[string]Counters{"be": be(200, 100, 200, 0)}})},
			final:    true, want: Pass},
		{name: "a backend broken on the canary only fails it, though the frontend's share is diluted",
			canary: win(host{frontends: map[string]Counters{"fe": fe(1000, 30)}, backends: map[string]Counters{
				"be_big": be(970, 0, 970, 0), "be_small": be(30, 30, 30, 30)}}),
			baseline: []Window{win(host{frontends: map[string]Counters{"fe": fe(1000, 0)}, backends: map[string]Counters{
				"be_big": be(970, 0, 970, 0), "be_small": be(30, 0, 30, 0)}})},
			want: Fail, counter: Counter5xx, object: "backend be_small"},
		{name: "too few requests to judge a ratio: watching, then inconclusive",
			canary: win(host{frontends: map[string]Counters{"fe": fe(10, 10)}}), baseline: []Window{healthy}, want: Watching},
		{name: "too few requests when the window ends: inconclusive",
			canary: win(host{frontends: map[string]Counters{"fe": fe(10, 10)}}), baseline: []Window{healthy}, final: true,
			want: Inconclusive, reason: []string{"served 10 requests", "--canary-min-requests=20"}},
		{name: "no traffic at all, window over: inconclusive",
			canary: win(host{}), final: true, want: Inconclusive},
		{name: "many small frontends judged together",
			canary: win(host{frontends: map[string]Counters{"a": fe(10, 10), "b": fe(10, 10), "c": fe(10, 10)}}),
			want:   Fail, counter: Counter5xx, object: "all frontends", reason: []string{"no other host to compare with (at most 5.0%"}},
		{name: "connection errors on a backend: fail naming econ",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, backends: map[string]Counters{"be": be(100, 0, 100, 60)}}),
			baseline: []Window{healthy}, want: Fail, counter: CounterConnError, object: "backend be",
			reason: []string{"failed connections (econ): 60.0% of the 100 connections of backend be"}},
		{name: "connection errors beyond the sessions (retries) count as all",
			canary: win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, backends: map[string]Counters{"be": be(100, 0, 100, 300)}}),
			want:   Fail, counter: CounterConnError, reason: []string{"100.0% of the 100 connections"}},
		{name: "a server whose checks fail on the canary only: fail",
			canary: win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, servers: map[string]Counters{
				"be/s1": srv("DOWN", "L4CON", 1), "be/s2": srv("UP", "L4OK", 0)}}),
			baseline: []Window{win(host{servers: map[string]Counters{"be/s1": srv("UP", "L4OK", 0), "be/s2": srv("UP", "L4OK", 0)}})},
			want:     Fail, counter: CounterChecks, object: "server be/s1",
			reason: []string{"1 server(s) fail theirs on the canary and on no other host", "be/s1 (DOWN, L4CON, went down 1 time(s))", "--canary-max-failed-checks"}},
		{name: "a server down with a failing check while one runs (\"* L7STS\")",
			canary: win(host{servers: map[string]Counters{"be/s1": srv("DOWN", "* L7STS", 0)}}),
			want:   Fail, counter: CounterChecks},
		{name: "a server whose checks fail on another host too: not the canary's doing",
			canary:   win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, servers: map[string]Counters{"be/s1": srv("DOWN", "L4TOUT", 1)}}),
			baseline: []Window{healthy, win(host{servers: map[string]Counters{"be/s1": srv("DOWN", "L4TOUT", 0)}})},
			final:    true, want: Pass},
		{name: "servers in maintenance, without checks, or still starting: not failing",
			canary: win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, servers: map[string]Counters{
				"be/m": srv("MAINT", "L4CON", 0), "be/n": srv("no check", "", 0), "be/i": srv("DOWN", "INI", 0), "be/ok": srv("DOWN 1/2", "L7OK", 0)}}),
			final: true, want: Pass},
		{name: "the process changed during the window: inconclusive",
			canary: Window{Start: host{pid: 1}.sample(), Now: host{pid: 2, frontends: map[string]Counters{"fe": fe(1000, 1000)}}.sample()},
			want:   Inconclusive, reason: []string{"pid 1, then 2"}},
		{name: "another host that restarted is left out of the comparison",
			canary: win(host{frontends: map[string]Counters{"fe": fe(100, 100)}}),
			baseline: []Window{{Start: host{pid: 1, frontends: map[string]Counters{"fe": fe(0, 0)}}.sample(),
				Now: host{pid: 2, frontends: map[string]Counters{"fe": fe(100, 100)}}.sample()}},
			want: Fail, counter: Counter5xx, reason: []string{"no other host to compare with"}},
		{name: "counters from a non-zero start: only the window counts",
			canary: Window{Start: host{frontends: map[string]Counters{"fe": fe(5000, 5000)}}.sample(),
				Now: host{frontends: map[string]Counters{"fe": fe(5100, 5000)}}.sample()},
			final: true, want: Pass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge(th, tt.canary, tt.baseline, tt.final)
			if j.Verdict != tt.want {
				t.Fatalf("Judge = %v (%s), want %v", j.Verdict, j.Reason, tt.want)
			}
			if j.Counter != tt.counter {
				t.Errorf("Counter = %q, want %q", j.Counter, tt.counter)
			}
			if tt.object != "" && j.Object != tt.object {
				t.Errorf("Object = %q, want %q", j.Object, tt.object)
			}
			for _, part := range tt.reason {
				if !strings.Contains(j.Reason, part) {
					t.Errorf("Reason %q does not say %q", j.Reason, part)
				}
			}
			if j.Verdict != Watching && j.Reason == "" {
				t.Error("a verdict without a reason")
			}
		})
	}
}

// TestJudgeMoreServersAllowed: --canary-max-failed-checks lets that many servers fail.
func TestJudgeMoreServersAllowed(t *testing.T) {
	c := win(host{frontends: map[string]Counters{"fe": fe(100, 0)}, servers: map[string]Counters{"be/s1": srv("DOWN", "L4CON", 1)}})
	loose := th
	loose.MaxFailedChecks = 1
	if j := Judge(loose, c, nil, true); j.Verdict != Pass {
		t.Errorf("one failing server with --canary-max-failed-checks=1: %v (%s), want pass", j.Verdict, j.Reason)
	}
	if j := Judge(th, c, nil, true); j.Verdict != Fail {
		t.Errorf("one failing server with --canary-max-failed-checks=0: %v, want fail", j.Verdict)
	}
}

func TestRefusedSaysWhereAndWhy(t *testing.T) {
	err := &Refused{Canary: "http://lb1:5555/v3", Judgement: Judgement{Verdict: Fail, Reason: "5xx responses: 100.0%"}, RolledBack: true}
	for _, part := range []string{"the canary host http://lb1:5555/v3 failed", "5xx responses: 100.0%", "back on the last good configuration", "the other hosts never had the new one"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%q does not say %q", err.Error(), part)
		}
	}
}
