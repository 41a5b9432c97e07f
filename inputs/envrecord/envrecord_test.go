package envrecord

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDifferences: what renderings would see otherwise, from a record of the running sidecar's
// environment and the environment here; the password and --env-secret's values are secret.
func TestDifferences(t *testing.T) {
	running := Environment{Allow: "HTTP_BIND", Secret: "TOKEN", Variables: map[string]string{"HTTP_BIND": "127.0.0.1:80", "TOKEN": "s3cret"},
		Secrets: map[string]bool{"TOKEN": true}, StatisticsPassword: "hunter2-long"}
	bind := map[string]string{"HTTP_BIND": "127.0.0.1:80"}
	for _, tc := range []struct {
		name     string
		recorded *Environment // nil: running
		here     Environment
		want     []Difference
	}{
		{"the same", nil, running, nil},
		{"the same values, other flags", nil, Environment{Allow: "HTTP_*,TOKEN", Variables: running.Variables, StatisticsPassword: running.StatisticsPassword}, nil},
		{"nothing here", nil, Environment{}, []Difference{{"HTTP_BIND", Missing, false}, {"TOKEN", Missing, true}, {StatisticsPassword, Missing, true}}},
		{"another value, one more variable, another password", nil,
			Environment{Variables: map[string]string{"HTTP_BIND": "127.0.0.1:8080", "TOKEN": "s3cret", "EXTRA": ""}, StatisticsPassword: "other"},
			[]Difference{{"EXTRA", Added, false}, {"HTTP_BIND", Other, false}, {StatisticsPassword, Other, true}}},
		{"a secret here only", &Environment{Variables: bind}, Environment{Variables: map[string]string{"HTTP_BIND": "127.0.0.1:80", "KEY": "k"}, Secrets: map[string]bool{"KEY": true}},
			[]Difference{{"KEY", Added, true}}},
		{"a password here only", &Environment{Variables: bind}, Environment{Variables: bind, StatisticsPassword: "x"},
			[]Difference{{StatisticsPassword, Added, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorded := running
			if tc.recorded != nil {
				recorded = *tc.recorded
			}
			// The record as the state directory keeps it.
			b, err := json.Marshal(New(recorded, "salt"))
			if err != nil {
				t.Fatal(err)
			}
			var kept Record
			if err := json.Unmarshal(b, &kept); err != nil {
				t.Fatal(err)
			}
			if got := kept.Differences(tc.here); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("differences %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecordHoldsNoValue: the values and the password are not in the record, and the same
// value hashes otherwise under another salt.
func TestRecordHoldsNoValue(t *testing.T) {
	env := Environment{Secret: "TOKEN", Variables: map[string]string{"TOKEN": "s3cret-token"}, Secrets: map[string]bool{"TOKEN": true}, StatisticsPassword: "hunter2-long"}
	a, b := New(env, "one"), New(env, "two")
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"s3cret-token", "hunter2-long"} {
		if strings.Contains(string(out), v) {
			t.Errorf("the record holds %q: %s", v, out)
		}
	}
	if a.Variables["TOKEN"] == b.Variables["TOKEN"] || a.StatisticsPassword == b.StatisticsPassword {
		t.Error("two salts give the same hashes")
	}
	if !a.Same(env) || a.Same(Environment{Secret: "TOKEN,OTHER", Variables: env.Variables, StatisticsPassword: env.StatisticsPassword}) {
		t.Error("Same does not tell the flags apart, or the same environment from itself")
	}
}

func TestDifferenceString(t *testing.T) {
	for d, want := range map[Difference]string{
		{Name: "A", Change: Missing}:              "A is set for the running sidecar, not here",
		{Name: "A", Change: Added}:                "A is set here, not for the running sidecar",
		{Name: StatisticsPassword, Change: Other}: "STATISTICS_PASSWORD has another value here",
	} {
		if got := d.String(); got != want {
			t.Errorf("%+v: %q, want %q", d, got, want)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		allow, secret, want string
	}{
		{"", "", ""},
		{"A,B_*", "", "--env-allow A,B_*"},
		{"", "S", "--env-secret S"},
		{"A", "S", "--env-allow A --env-secret S"},
	} {
		env := Environment{Allow: tc.allow, Secret: tc.secret}
		if got := New(env, "").Flags(); got != tc.want || env.Flags() != tc.want {
			t.Errorf("%+v: %q and %q, want %q", env, got, env.Flags(), tc.want)
		}
	}
}
