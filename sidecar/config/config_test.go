package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFlagsHaveEnvironmentTwins(t *testing.T) {
	env := map[string]string{"MASTER_SOCKET": "/env.sock", "WAIT": "1s:5s", "NAMESPACE": "from-env", "STATISTICS_PASSWORD": "s3cret"}
	o, err := ParseRun([]string{"--namespace", "from-flag"}, "", func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.HAProxy.MasterSocket != "/env.sock" {
		t.Errorf("master socket = %q, want the environment's", o.HAProxy.MasterSocket)
	}
	if o.Inputs.Namespace != "from-flag" {
		t.Errorf("namespace = %q: the command line must win over the environment", o.Inputs.Namespace)
	}
	if o.Wait.Min != time.Second || o.Wait.Max != 5*time.Second {
		t.Errorf("wait = %v", o.Wait.String())
	}
	if o.Inputs.StatsPassword != "s3cret" {
		t.Errorf("STATISTICS_PASSWORD not read: %q", o.Inputs.StatsPassword)
	}

	t.Run("a bad environment value is an error naming the variable", func(t *testing.T) {
		_, err := ParseRun(nil, "", func(k string) string {
			if k == "RELOAD_TIMEOUT" {
				return "soon"
			}
			return ""
		}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "$RELOAD_TIMEOUT") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		in       string
		min, max time.Duration
		bad      bool
	}{
		{in: "200ms:2s", min: 200 * time.Millisecond, max: 2 * time.Second},
		{in: "1s", min: time.Second, max: 4 * time.Second},
		{in: "2s:1s", bad: true},
		{in: "x:1s", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var w Wait
			err := w.Set(tc.in)
			if tc.bad != (err != nil) {
				t.Fatalf("Set(%q) = %v", tc.in, err)
			}
			if !tc.bad && (w.Min != tc.min || w.Max != tc.max) {
				t.Errorf("Set(%q) = %v", tc.in, w.String())
			}
		})
	}
}

func TestAllowedEnv(t *testing.T) {
	got := AllowedEnv("HTTP_BIND, APP_*", []string{"HTTP_BIND=:80", "APP_A=1", "APP_B=2", "SECRET=x", "HTTP_BINDX=no"})
	if len(got) != 3 || got["HTTP_BIND"] != ":80" || got["APP_B"] != "2" {
		t.Errorf("allowedEnv = %v", got)
	}
}

// TestReadmeListsEveryFlag keeps the README's flag table true.
func TestReadmeListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	// Every flag table of the README (the main one, and diff's).
	var table []byte
	for rest := readme; ; {
		var t []byte
		var found bool
		if _, rest, found = bytes.Cut(rest, []byte("| Flag | Environment | Default | What it does |")); !found {
			break
		}
		t, rest, _ = bytes.Cut(rest, []byte("\n\n"))
		table = append(append(table, t...), '\n')
	}
	for _, cmd := range []string{"run", "render", "validate", "diff"} {
		for _, name := range Names(cmd) {
			if len(name) == 1 {
				continue // a short alias, documented with its long name
			}
			if !regexp.MustCompile("`--" + regexp.QuoteMeta(name) + "`").Match(readme) {
				t.Errorf("README.md does not document --%s", name)
			}
			// The flag table's row: | `--NAME` [(render)] | ENVIRONMENT | ...
			row := regexp.MustCompile("(?m)^\\| `--" + regexp.QuoteMeta(name) + "`(?:, `-[a-z]`)?(?: \\(render\\))? \\| ([^|]*) \\|").FindSubmatch(table)
			if row == nil {
				t.Errorf("README.md's flag table has no row for --%s", name)
				continue
			}
			for _, env := range EnvNames(name) {
				if !strings.Contains(string(row[1]), "`"+env+"`") {
					t.Errorf("README.md's row of --%s: the environment column %q does not name %s", name, row[1], env)
				}
			}
		}
	}
}

func TestDataplaneModeFlags(t *testing.T) {
	noEnv := func(string) string { return "" }
	o, err := ParseRun([]string{"--dir=.", "--reload=dataplane", "--dataplane-url=http://lb1:5555/v3", "--dataplane-mode=servers", "--dataplane-backends", "be_web, be_api"}, "", noEnv, &bytes.Buffer{})
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o.Dataplane.Mode != "servers" || strings.Join(o.Dataplane.Backends, "|") != "be_web|be_api" {
		t.Errorf("mode %q, backends %q", o.Dataplane.Mode, o.Dataplane.Backends)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir=.", "--dataplane-mode=servers"}, "--dataplane-mode=servers needs --reload=dataplane"},
		{[]string{"--dir=.", "--reload=dataplane", "--dataplane-backends=be_web"}, "--dataplane-backends needs --dataplane-mode=servers"},
		{[]string{"--dir=.", "--reload=dataplane", "--dataplane-mode=backends"}, "config or servers"},
	} {
		o, err := ParseRun(tc.args, "", noEnv, &bytes.Buffer{})
		if err == nil {
			err = o.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// docs/flags.md says when a rendering ahead starts as the flag's help does, and the help says
// the pause and the tries the pipeline uses (AheadSettle, AheadTries).
func TestFlagsDocSaysWhenARenderingAheadStarts(t *testing.T) {
	var w Wait
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	w.register(fs)
	when := regexp.MustCompile(`\([^)]*\)`).FindString(fs.Lookup("render-ahead").Usage)
	for _, want := range []string{fmt.Sprintf("(%d ms after", AheadSettle.Milliseconds()), fmt.Sprintf("at most %d times", AheadTries)} {
		if !strings.Contains(when, want) {
			t.Errorf("the help of --render-ahead says %q, not %q", when, want)
		}
	}
	doc, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--render-ahead` \\|.*$").Find(doc)
	if row == nil {
		t.Fatal("docs/flags.md has no row for --render-ahead")
	}
	if !strings.Contains(string(row), when) {
		t.Errorf("docs/flags.md's row of --render-ahead does not say %q:\n%s", when, row)
	}
}
