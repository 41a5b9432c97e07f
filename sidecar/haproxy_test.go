package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// TestNotTakingOverAnUnnamedConfig: with its source directory missing, run refuses to take
// over a configuration file --haproxy-config did not name (naming both); it starts when the
// directory exists, when the file was named, or when the file is the sidecar's already.
func TestNotTakingOverAnUnnamedConfig(t *testing.T) {
	etc := t.TempDir()
	cfgFile := filepath.Join(etc, "haproxy.cfg")
	if err := os.WriteFile(cfgFile, []byte("global\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	present, missing := t.TempDir(), filepath.Join(etc, "no-such-dir")
	state := filepath.Join(etc, ".haproxy-sidecar")
	l := local{config: cfgFile, state: state}
	run := func(dir, named string) *config.Run {
		return &config.Run{Source: config.Source{Kind: "file", Dir: dir}, HAProxy: config.HAProxy{Config: named}}
	}
	err := notTakingOver(run(missing, ""), l, true)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), cfgFile) {
		t.Fatalf("%v: want a refusal naming the directory and the file", err)
	}
	for name, c := range map[string]*config.Run{"the directory exists": run(present, ""), "the file was named": run(missing, cfgFile),
		"another source": {Source: config.Source{Kind: "kube"}}} {
		if err := notTakingOver(c, l, true); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := notTakingOver(run(missing, ""), l, false); err != nil {
		t.Errorf("no file to take over: %v", err)
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := notTakingOver(run(missing, ""), l, true); err != nil {
		t.Errorf("the sidecar's own file (its state directory is there): %v", err)
	}
}
