package sidecar

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/envrecord"
)

// TestHideLines: the current lines the proposed files do not have are replaced, the others
// kept, the newlines as they were.
func TestHideLines(t *testing.T) {
	for _, tc := range []struct{ was, is, want string }{
		{"a\nsecret x\nb\n", "a\nb\n", "a\n#\nb\n"},
		{"a\nb", "b\na\n", "a\nb"},
		{"a\n\nold", "a\n\nnew\n", "a\n\n#"},
		{"", "a\n", ""},
	} {
		if got := string(hideLines([]byte(tc.was), []byte(tc.is), "#")); got != tc.want {
			t.Errorf("hideLines(%q, %q) = %q, want %q", tc.was, tc.is, got, tc.want)
		}
	}
}

// TestSecretsUnknown: the secrets whose running values diff does not have; one set only here
// is diff's own, which it masks.
func TestSecretsUnknown(t *testing.T) {
	diffs := []envrecord.Difference{
		{Name: "BIND", Change: envrecord.Other},
		{Name: "TOKEN", Change: envrecord.Other, Secret: true},
		{Name: "KEY", Change: envrecord.Added, Secret: true},
		{Name: envrecord.StatisticsPassword, Change: envrecord.Missing, Secret: true},
	}
	if got, want := secretsUnknown(diffs), []string{"TOKEN", envrecord.StatisticsPassword}; !reflect.DeepEqual(got, want) {
		t.Errorf("secretsUnknown = %q, want %q", got, want)
	}
}

// TestLiveEnvironment: against a state directory's record, the same environment is no
// difference; another is an error naming it (never its value) and the flags the sidecar has,
// or, with warn, the differences; no record is none.
func TestLiveEnvironment(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	running := envrecord.Environment{Allow: "BIND", Variables: map[string]string{"BIND": "127.0.0.1:80"}, StatisticsPassword: "pw-of-the-sidecar"}
	if d, err := liveEnvironment(dir, envrecord.Environment{}, "fail", log); d != nil || err != nil {
		t.Errorf("no record: %v %v, want nothing", d, err)
	}
	b, err := json.Marshal(envrecord.New(running, "salt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, envrecord.File), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := liveEnvironment(dir, running, "fail", log); d != nil || err != nil {
		t.Errorf("the same: %v %v, want nothing", d, err)
	}
	here := envrecord.Environment{StatisticsPassword: "another-password"}
	_, err = liveEnvironment(dir, here, "fail", log)
	for _, want := range []string{"BIND is set for the running sidecar, not here", "STATISTICS_PASSWORD has another value here",
		"the running sidecar has --env-allow BIND", "--env-mismatch=warn"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "pw-of-the-sidecar") || strings.Contains(err.Error(), "another-password")) {
		t.Errorf("the error holds a password: %v", err)
	}
	if d, err := liveEnvironment(dir, here, "warn", log); len(d) != 2 || err != nil {
		t.Errorf("warn: %v %v, want the two differences", d, err)
	}
}
