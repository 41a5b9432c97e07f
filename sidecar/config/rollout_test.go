package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestRolloutFlags(t *testing.T) {
	dp := []string{"--dir", "manifests", "--reload=dataplane", "--dataplane-url", "https://lb1:5555/v3"}
	parse := func(t *testing.T, args []string, env map[string]string) (*Run, error) {
		t.Helper()
		r, err := ParseRun(args, "", envOf(env), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return r, r.Validate()
	}

	r, err := parse(t, dp, nil)
	if err != nil || r.Rollout.Canary() || r.Rollout.Window != 30*time.Second || r.Rollout.MinRequests != 100 || r.Rollout.Inconclusive != "promote" {
		t.Errorf("defaults: %+v, %v; want parallel, a 30s window, 100 requests, promote", r.Rollout, err)
	}
	r, err = parse(t, append(dp, "--rollout=canary", "--canary-window=5s", "--canary-max-5xx-ratio=0.1"),
		map[string]string{"HAPROXY_SIDECAR_CANARY_INCONCLUSIVE": "rollback", "HAPROXY_SIDECAR_CANARY_MAX_FAILED_CHECKS": "2"})
	if err != nil || !r.Rollout.Canary() || r.Rollout.Window != 5*time.Second || r.Rollout.Max5xxRatio != 0.1 ||
		r.Rollout.Inconclusive != "rollback" || r.Rollout.MaxFailedChecks != 2 {
		t.Errorf("given: %+v, %v", r.Rollout, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", "manifests", "--rollout=canary"}, "--rollout=canary needs --reload=dataplane"},
		{append(dp, "--rollout=canary", "--canary-max-5xx-ratio=5"), "--canary-max-5xx-ratio 5: want a share from 0 to 1"},
		{append(dp, "--canary-window=0s"), "--canary-window 0s: want more than 0"},
		{append(dp, "--canary-min-requests=-1"), "--canary-min-requests -1: want 0 or more"},
	} {
		if _, err := parse(t, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := ParseRun([]string{"--rollout=blue-green"}, "", envOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "want parallel or canary") {
		t.Errorf("an unknown rollout: %v", err)
	}
}
