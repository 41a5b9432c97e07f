package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// reloaded are renderings HAProxy refused at a reload.
func reloaded(hashes ...string) []live.Refusal {
	var r []live.Refusal
	for _, h := range hashes {
		r = append(r, live.Refusal{Hash: h})
	}
	return r
}

// checked are renderings haproxy -c rejected behind a runtime change.
func checked(hashes ...string) []live.Refusal {
	var r []live.Refusal
	for _, h := range hashes {
		r = append(r, live.Refusal{Hash: h, Check: true, Err: errors.New("rejected")})
	}
	return r
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	due := now.Add(time.Second)
	tests := []struct {
		name string
		f    Facts
		want Action
		at   time.Time
	}{
		{name: "nothing rendered: hold", f: Facts{HAProxy: live.State{Runs: "a"}}, want: DoHold},
		{name: "rejected by haproxy -c after the runtime API made it live: revert",
			f: Facts{Rendered: "b", HAProxy: live.State{Runs: "b", Refused: checked("b")}}, want: DoRevert},
		{name: "rejected, even on a standby", f: Facts{Rendered: "b", HAProxy: live.State{Refused: checked("b")}, Standby: true}, want: DoRevert},
		{name: "nothing rendered, HAProxy runs a rejected rendering: revert",
			f: Facts{HAProxy: live.State{Runs: "b", Refused: checked("b")}}, want: DoRevert},
		{name: "nothing rendered, HAProxy runs a rendering refused at a reload only: hold",
			f: Facts{HAProxy: live.State{Runs: "b", Refused: reloaded("b")}}, want: DoHold},
		{name: "a rendering, HAProxy runs a rejected one: the rendering takes its place",
			f: Facts{Rendered: "c", HAProxy: live.State{Runs: "b", Refused: checked("b")}}, want: DoRuntime},
		{name: "HAProxy runs it: nothing", f: Facts{Rendered: "a", HAProxy: live.State{Runs: "a"}}, want: DoNothing},
		{name: "HAProxy runs it, but a deferred reload waits: the runtime API takes its changes back",
			f: Facts{Rendered: "a", HAProxy: live.State{Runs: "", ReloadAt: due}}, want: DoRuntime},
		{name: "HAProxy down, these very files written for its start: nothing",
			f: Facts{Rendered: "a", HAProxy: live.State{Runs: "", LoadsAtStart: "a"}}, want: DoNothing},
		{name: "HAProxy should run, these very files written while it does not: reload (and report it)",
			f: Facts{Rendered: "a", HAProxy: live.State{Runs: "", LoadsAtStart: "a"}, ExpectRunning: true, ReloadWhy: "not known"}, want: DoReload},
		{name: "HAProxy down, a newer rendering: written through the reload path",
			f: Facts{Rendered: "b", HAProxy: live.State{Runs: "", LoadsAtStart: "a"}, ReloadWhy: "not known"}, want: DoReload},
		{name: "servers only: runtime", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a"}}, want: DoRuntime},
		{name: "what runs is not known: reload", f: Facts{Rendered: "b", HAProxy: live.State{Runs: ""}, ReloadWhy: "not known"}, want: DoReload},
		{name: "a new frontend: reload", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a"}, ReloadWhy: "frontend changed"}, want: DoReload},
		{name: "refused before: hold, no storm", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a", Refused: reloaded("x", "b")}, ReloadWhy: "frontend changed"}, want: DoHold},
		{name: "another rendering refused before: reload", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a", Refused: reloaded("x")}, ReloadWhy: "frontend changed"}, want: DoReload},
		{name: "rejected by the check, not refused at a reload: reload", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a", Refused: checked("x")}, ReloadWhy: "frontend changed"}, want: DoReload},
		{name: "standby: validate only", f: Facts{Rendered: "b", HAProxy: live.State{Runs: "a"}, ReloadWhy: "x", Standby: true}, want: DoStandby},
		{name: "standby even when nothing changed", f: Facts{Rendered: "a", HAProxy: live.State{Runs: "a"}, Standby: true}, want: DoStandby},
		{name: "reload too soon: defer to the end of the interval",
			f:    Facts{Rendered: "b", HAProxy: live.State{Runs: "a", LastReload: now.Add(-time.Second)}, ReloadWhy: "x", Now: now, MinReloadInterval: 10 * time.Second},
			want: DoDefer, at: now.Add(9 * time.Second)},
		{name: "interval over: reload",
			f:    Facts{Rendered: "b", HAProxy: live.State{Runs: "a", LastReload: now.Add(-time.Minute)}, ReloadWhy: "x", Now: now, MinReloadInterval: 10 * time.Second},
			want: DoReload},
		{name: "first reload is never deferred",
			f:    Facts{Rendered: "b", ReloadWhy: "x", Now: now, MinReloadInterval: 10 * time.Second},
			want: DoReload},
		{name: "a runtime change is never deferred",
			f:    Facts{Rendered: "b", HAProxy: live.State{Runs: "a", LastReload: now}, Now: now, MinReloadInterval: 10 * time.Second},
			want: DoRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.f)
			if d.Action != tt.want {
				t.Fatalf("Decide = %v (%s), want %v", d.Action, d.Why, tt.want)
			}
			if !d.At.Equal(tt.at) {
				t.Errorf("at %v, want %v", d.At, tt.at)
			}
			if (d.Action == DoHold || d.Action == DoReload) && tt.f.Rendered != "" && d.Why == "" && tt.f.ReloadWhy != "" {
				t.Errorf("%v without a reason", d.Action)
			}
		})
	}
}
