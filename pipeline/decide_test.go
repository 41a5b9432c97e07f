package pipeline

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		f    Facts
		want Action
		at   time.Time
	}{
		{name: "nothing rendered: hold", f: Facts{Runs: "a"}, want: DoHold},
		{name: "HAProxy runs it: nothing", f: Facts{Rendered: "a", Runs: "a"}, want: DoNothing},
		{name: "HAProxy runs it, but a deferred reload waits: the runtime API takes its changes back",
			f: Facts{Rendered: "a", Runs: "", ReloadDue: true}, want: DoRuntime},
		{name: "HAProxy down, these very files written for its start: nothing",
			f: Facts{Rendered: "a", Runs: "", Written: "a"}, want: DoNothing},
		{name: "HAProxy down, a newer rendering: written through the reload path",
			f: Facts{Rendered: "b", Runs: "", Written: "a", ReloadWhy: "not known"}, want: DoReload},
		{name: "servers only: runtime", f: Facts{Rendered: "b", Runs: "a"}, want: DoRuntime},
		{name: "what runs is not known: reload", f: Facts{Rendered: "b", Runs: "", ReloadWhy: "not known"}, want: DoReload},
		{name: "a new frontend: reload", f: Facts{Rendered: "b", Runs: "a", ReloadWhy: "frontend changed"}, want: DoReload},
		{name: "refused before: hold, no storm", f: Facts{Rendered: "b", Runs: "a", ReloadWhy: "frontend changed", Refused: true}, want: DoHold},
		{name: "standby: validate only", f: Facts{Rendered: "b", Runs: "a", ReloadWhy: "x", Standby: true}, want: DoStandby},
		{name: "standby even when nothing changed", f: Facts{Rendered: "a", Runs: "a", Standby: true}, want: DoStandby},
		{name: "reload too soon: defer to the end of the interval",
			f:    Facts{Rendered: "b", Runs: "a", ReloadWhy: "x", Now: now, LastReload: now.Add(-time.Second), MinReloadInterval: 10 * time.Second},
			want: DoDefer, at: now.Add(9 * time.Second)},
		{name: "interval over: reload",
			f:    Facts{Rendered: "b", Runs: "a", ReloadWhy: "x", Now: now, LastReload: now.Add(-time.Minute), MinReloadInterval: 10 * time.Second},
			want: DoReload},
		{name: "first reload is never deferred",
			f:    Facts{Rendered: "b", ReloadWhy: "x", Now: now, MinReloadInterval: 10 * time.Second},
			want: DoReload},
		{name: "a runtime change is never deferred",
			f:    Facts{Rendered: "b", Runs: "a", Now: now, LastReload: now, MinReloadInterval: 10 * time.Second},
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
