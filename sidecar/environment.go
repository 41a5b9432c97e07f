package sidecar

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/envrecord"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// environment is what renderings with these inputs see of the process environment.
func environment(in config.Inputs) envrecord.Environment {
	secrets := map[string]bool{}
	for name := range config.AllowedEnv(in.EnvSecret, os.Environ()) {
		secrets[name] = true
	}
	return envrecord.Environment{Allow: in.EnvAllow, Secret: in.EnvSecret, Variables: in.Env(), Secrets: secrets, StatisticsPassword: in.StatsPassword}
}

// recordEnvironment keeps in the state directory what the renderings take from the
// environment (hashes, no value), for diff --live; a record of the same is left as it is.
func recordEnvironment(store *generation.Store, env envrecord.Environment, log *slog.Logger) {
	if rec, err := loadState[envrecord.Record](store.ReadState, envrecord.File); err == nil && rec != nil && rec.Same(env) {
		return
	}
	b, err := json.Marshal(envrecord.New(env, rand.Text()))
	if err == nil {
		err = store.WriteState(envrecord.File, b)
	}
	if err != nil {
		log.Warn("record what the renderings take from the environment (diff --live compares it with its own)", "file", envrecord.File, "error", err)
	}
}

// liveEnvironment compares the environment of the running sidecar with state directory dir
// with diff's: the differences to report (mismatch warn), or an error naming them (fail).
// A sidecar that keeps no record gets a warning in the log: its environment is not known.
func liveEnvironment(dir string, here envrecord.Environment, mismatch string, log *slog.Logger) ([]envrecord.Difference, error) {
	rec, err := loadState[envrecord.Record](stateIn(dir), envrecord.File)
	if err != nil {
		return nil, fmt.Errorf("--live: %w", err)
	}
	if rec == nil {
		log.Warn("the running sidecar keeps no record of its environment (an earlier version): the prediction renders with this one's, which may not be its own", "file", filepath.Join(dir, envrecord.File))
		return nil, nil
	}
	diffs := rec.Differences(here)
	if len(diffs) == 0 || mismatch == "warn" {
		return diffs, nil
	}
	hint := "give diff the same values"
	if f := rec.Flags(); f != "" && f != here.Flags() {
		hint += " and flags (the running sidecar has " + f + ")"
	}
	return nil, fmt.Errorf("--live: the running sidecar renders with another environment than diff: %s. A prediction made with diff's would not be the running sidecar's: %s, or pass --env-mismatch=warn to predict with diff's anyway",
		differences(diffs), hint)
}

// differences are diffs as one line.
func differences(diffs []envrecord.Difference) string {
	s := make([]string, len(diffs))
	for i, d := range diffs {
		s[i] = d.String()
	}
	return strings.Join(s, "; ")
}

// secretsUnknown are the names of the secrets the running sidecar renders with whose values
// diff does not have (so cannot mask): the lines of its configuration that may hold them are
// not shown.
func secretsUnknown(diffs []envrecord.Difference) []string {
	var out []string
	for _, d := range diffs {
		if d.Secret && d.Change != envrecord.Added {
			out = append(out, d.Name)
		}
	}
	return out
}

// hideLines is was with each line that is not in is replaced by marker: the lines of the
// current files that the proposed ones do not have, which may hold a value diff cannot mask.
func hideLines(was, is []byte, marker string) []byte {
	keep := map[string]bool{}
	for _, l := range bytes.SplitAfter(is, []byte("\n")) {
		keep[string(bytes.TrimSuffix(l, []byte("\n")))] = true
	}
	var out bytes.Buffer
	for _, l := range bytes.SplitAfter(was, []byte("\n")) {
		line, nl := bytes.CutSuffix(l, []byte("\n"))
		if len(l) == 0 {
			continue
		}
		if keep[string(line)] {
			out.Write(line)
		} else {
			out.WriteString(marker)
		}
		if nl {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
