package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// envOf is a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestPrefixedEnvironmentTwins(t *testing.T) {
	var warn bytes.Buffer
	o, err := ParseOnce("render", nil, "", envOf(map[string]string{
		"HAPROXY_SIDECAR_OUT": "build", "HAPROXY_SIDECAR_DIR": "manifests", "HAPROXY_SIDECAR_SOURCE": "etcd",
		"HAPROXY_SIDECAR_VALIDATE": "false", "HAPROXY_SIDECAR_NAMESPACE": "edge", "HAPROXY_SIDECAR_WATCH": "nodes.v1",
	}), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if o.Out != "build" || o.Source.Dir != "manifests" || o.Source.Kind != "etcd" || o.Render.Validate || o.Inputs.Namespace != "edge" || len(o.Inputs.Watch) != 1 {
		t.Errorf("prefixed twins not read: %+v", o)
	}
	if warn.Len() > 0 {
		t.Errorf("warned about prefixed variables: %s", warn.String())
	}
	if got := EnvName("master-socket"); got != "HAPROXY_SIDECAR_MASTER_SOCKET" {
		t.Errorf("EnvName(master-socket) = %s", got)
	}
}

func TestUnprefixedEnvironmentNamesWarn(t *testing.T) {
	var warn bytes.Buffer
	o, err := ParseOnce("render", nil, "", envOf(map[string]string{"OUT": "build", "DIR": "manifests", "HOME": "/root"}), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if o.Out != "build" || o.Source.Dir != "manifests" {
		t.Errorf("the old names stop working before their time: out %q, dir %q", o.Out, o.Source.Dir)
	}
	lines := strings.Split(strings.TrimSuffix(warn.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one warning line per old variable used, got:\n%s", warn.String())
	}
	for _, want := range [][2]string{{"$DIR", "$HAPROXY_SIDECAR_DIR"}, {"$OUT", "$HAPROXY_SIDECAR_OUT"}} {
		if !strings.Contains(warn.String(), want[0]+" is deprecated") || !strings.Contains(warn.String(), want[1]) {
			t.Errorf("no warning naming %s and %s:\n%s", want[0], want[1], warn.String())
		}
	}
}

func TestEnvironmentPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
		warn bool
	}{
		{"the flag wins", []string{"--namespace", "flag"}, map[string]string{"HAPROXY_SIDECAR_NAMESPACE": "prefixed", "NAMESPACE": "old"}, "flag", false},
		{"then the prefixed twin", nil, map[string]string{"HAPROXY_SIDECAR_NAMESPACE": "prefixed", "NAMESPACE": "old"}, "prefixed", false},
		{"then the old name", nil, map[string]string{"NAMESPACE": "old"}, "old", true},
		{"then the default", nil, nil, "lb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warn bytes.Buffer
			o, err := ParseRun(tc.args, "", envOf(tc.env), &warn)
			if err != nil {
				t.Fatal(err)
			}
			if o.Inputs.Namespace != tc.want {
				t.Errorf("namespace %q, want %q", o.Inputs.Namespace, tc.want)
			}
			if (warn.Len() > 0) != tc.warn {
				t.Errorf("warning %q, want one: %v", warn.String(), tc.warn)
			}
		})
	}
}

func TestStatisticsPasswordKeepsItsName(t *testing.T) {
	var warn bytes.Buffer
	o, err := ParseRun(nil, "", envOf(map[string]string{"STATISTICS_PASSWORD": "seed", "KUBECONFIG": "/k"}), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if o.Inputs.StatsPassword != "seed" || o.Source.Kube.Kubeconfig != "/k" || warn.Len() > 0 {
		t.Errorf("STATISTICS_PASSWORD %q, KUBECONFIG %q, warnings %q: both are kept, without a warning", o.Inputs.StatsPassword, o.Source.Kube.Kubeconfig, warn.String())
	}
	o, err = ParseRun(nil, "", envOf(map[string]string{"STATISTICS_PASSWORD": "seed", "HAPROXY_SIDECAR_STATISTICS_PASSWORD": "prefixed"}), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if o.Inputs.StatsPassword != "prefixed" {
		t.Errorf("statistics password %q: the prefixed twin wins", o.Inputs.StatsPassword)
	}
}

func TestEnvironmentErrorsNameTheVariableAndTheValues(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"VALIDATE": "no"}, []string{`$VALIDATE="no"`, "want true or false"}},
		{map[string]string{"HAPROXY_SIDECAR_VALIDATE": "no"}, []string{`$HAPROXY_SIDECAR_VALIDATE="no"`, "want true or false"}},
		{map[string]string{"HAPROXY_SIDECAR_SOURCE": "git"}, []string{`$HAPROXY_SIDECAR_SOURCE="git"`, "want file, kube or etcd"}},
		{map[string]string{"HAPROXY_SIDECAR_RELOAD": "signal"}, []string{`$HAPROXY_SIDECAR_RELOAD`, "want master-socket, dataplane, command or none"}},
		{map[string]string{"HAPROXY_SIDECAR_LOG_FORMAT": "xml"}, []string{`$HAPROXY_SIDECAR_LOG_FORMAT`, "want text or json"}},
		{map[string]string{"HAPROXY_SIDECAR_LOG_LEVEL": "loud"}, []string{`$HAPROXY_SIDECAR_LOG_LEVEL`, "want debug, info, warn or error"}},
		{map[string]string{"HAPROXY_SIDECAR_RELOAD_TIMEOUT": "soon"}, []string{`$HAPROXY_SIDECAR_RELOAD_TIMEOUT`, "want a duration"}},
		{map[string]string{"HAPROXY_SIDECAR_KUBE_BURST": "many"}, []string{`$HAPROXY_SIDECAR_KUBE_BURST`, "want a whole number"}},
	} {
		_, err := ParseRun(nil, "", envOf(tc.env), &bytes.Buffer{})
		if err == nil {
			t.Errorf("%v accepted", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", tc.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("%v: error %q names a flag; the value came from the environment", tc.env, err)
		}
	}
}

func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--namespce", "x"}, []string{"unknown flag --namespce", "did you mean --namespace?", "haproxy-sidecar run --help"}},
		{[]string{"--relaod=none"}, []string{"did you mean --reload?"}},
		{[]string{"--log-formt", "json"}, []string{"did you mean --log-format?"}},
		{[]string{"--frobnicate"}, []string{"unknown flag --frobnicate (haproxy-sidecar run --help lists the flags)"}},
		{[]string{"--validate=no"}, []string{`--validate="no": want true or false`}},
		{[]string{"--source", "git"}, []string{`--source="git": want file, kube or etcd`}},
		{[]string{"--reload-timeout"}, []string{"--reload-timeout needs a value"}},
	} {
		var out bytes.Buffer
		_, err := ParseRun(tc.args, "the summary", envOf(nil), &out)
		if err == nil {
			t.Errorf("%q accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", tc.args, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") || out.Len() > 0 {
			t.Errorf("%q: want one line and no help; error %q, printed %d bytes", tc.args, err, out.Len())
		}
		if strings.Contains(tc.args[0], "frobnicate") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: nothing is near enough to suggest: %v", tc.args, err)
		}
	}
	var out bytes.Buffer
	if _, err := ParseRun([]string{"--help"}, "the summary", envOf(nil), &out); !errors.Is(err, ErrHelp) || !strings.Contains(out.String(), "the summary") {
		t.Errorf("--help: %v, printed %q", err, out.String())
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"namespace", "namespace", 0}, {"namespce", "namespace", 1}, {"relaod", "reload", 1}, {"dir", "out", 3}, {"", "abc", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestBooleanFlags(t *testing.T) {
	o, err := ParseRun([]string{"--pprof", "--runtime-api=false"}, "", envOf(map[string]string{"HAPROXY_SIDECAR_LEADER_ELECT": "true", "HAPROXY_SIDECAR_RUNTIME_API": "true"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !o.HTTP.Profiles || o.HAProxy.RuntimeAPI || !o.Leader.Elect {
		t.Errorf("--pprof (no value) %v, --runtime-api=false over the environment's true %v, HAPROXY_SIDECAR_LEADER_ELECT=true %v",
			o.HTTP.Profiles, o.HAProxy.RuntimeAPI, o.Leader.Elect)
	}
}

// TestUnknownEnvironmentVariables: a HAPROXY_SIDECAR_ variable no flag of any command reads
// is said, with the nearest flag's variable; the twins of every command's flags, the tests'
// own settings and other variables are not.
func TestUnknownEnvironmentVariables(t *testing.T) {
	got := UnknownEnv([]string{"HAPROXY_SIDECAR_NAMESPCE=edge", "HAPROXY_SIDECAR_MASTER_SOCKET=/run/m.sock",
		"HAPROXY_SIDECAR_OUT=x", "HAPROXY_SIDECAR_LIVE=/s", "HAPROXY_SIDECAR_REQUIRE_TESTBINS=1", "HAPROXY_SIDECAR_STATISTICS_PASSWROD=x",
		"HAPROXY_SIDECAR_COLOUR=blue", "HAPROXY_SIDECAR_=x", "HAPROXY_SIDECAR_O=x", "NAMESPCE=edge", "HOME=/root"})
	joined := strings.Join(got, "\n")
	for _, w := range []string{
		"$HAPROXY_SIDECAR_NAMESPCE is no flag's variable and is ignored: did you mean $HAPROXY_SIDECAR_NAMESPACE (--namespace)?",
		"$HAPROXY_SIDECAR_STATISTICS_PASSWROD is no flag's variable and is ignored: did you mean $HAPROXY_SIDECAR_STATISTICS_PASSWORD (--statistics-password)?",
		"$HAPROXY_SIDECAR_COLOUR is no flag's variable and is ignored (haproxy-sidecar COMMAND --help",
		"$HAPROXY_SIDECAR_ is no flag's variable",
		"$HAPROXY_SIDECAR_O is no flag's variable", // -o is diff's alias of --output: its twin is HAPROXY_SIDECAR_OUTPUT
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("missing %q in:\n%s", w, joined)
		}
	}
	if len(got) != 5 {
		t.Errorf("want 5 lines, got:\n%s", joined)
	}
}
