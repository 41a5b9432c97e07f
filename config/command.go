package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
)

// Run is `haproxy-sidecar run`: watch the inputs and keep HAProxy configured.
type Run struct {
	Source    Source
	Inputs    Inputs
	Render    Render
	Dirs      Dirs
	HAProxy   HAProxy
	Wait      Wait
	Dataplane Dataplane
	Leader    Leader
	HTTP      HTTP
	Log       Log
}

func (r *Run) register(f *flags) {
	f.add("Inputs: where they come from", &r.Source)
	f.add("Inputs: which objects, what templates see", &r.Inputs)
	f.add("Rendering and validation", &r.Render)
	f.add("Directories templates name", &r.Dirs)
	f.add("HAProxy: files, reloads, runtime API", &r.HAProxy)
	f.add("Pacing", &r.Wait)
	f.add("Remote HAProxy hosts (--reload=dataplane)", &r.Dataplane)
	f.add("Leader election (--source=kube)", &r.Leader)
	f.add("HTTP: metrics, health, profiles", &r.HTTP)
	f.add("Logs", &r.Log)
}

// Validate checks the configuration as a whole.
func (r *Run) Validate() error {
	if err := validateAll(&r.Source, &r.Inputs, &r.Render, &r.Dirs, &r.HAProxy, &r.Wait, &r.Dataplane, &r.Leader, &r.HTTP, &r.Log); err != nil {
		return err
	}
	if r.Leader.Elect && r.Source.Kind != "kube" {
		return errors.New("--leader-elect needs --source=kube")
	}
	return nil
}

// Once is `haproxy-sidecar render` and `validate`: read the inputs once, render and validate.
type Once struct {
	// Command is "render" (write into Out) or "validate" (write nothing).
	Command string
	Source  Source
	Inputs  Inputs
	Render  Render
	Dirs    Dirs
	Log     Log
	// Out is where render writes haproxy.cfg, certs/, maps/ and files/.
	Out string
}

func (o *Once) register(f *flags) {
	f.add("Inputs: where they come from", &o.Source)
	f.add("Inputs: which objects, what templates see", &o.Inputs)
	f.add("Rendering and validation", &o.Render)
	f.add("Directories templates name", &o.Dirs)
	f.add("Logs", &o.Log)
	if o.Command == "render" {
		f.add("Output", outFlag{&o.Out})
	}
}

// Validate checks the configuration as a whole.
func (o *Once) Validate() error {
	if err := validateAll(&o.Source, &o.Inputs, &o.Render, &o.Dirs, &o.Log); err != nil {
		return err
	}
	if o.Command == "render" && o.Out == "" {
		return errors.New("render needs --out DIR")
	}
	return nil
}

type outFlag struct{ out *string }

func (o outFlag) register(fs *flag.FlagSet) {
	fs.StringVar(o.out, "out", "", "directory to write haproxy.cfg, certs/, maps/ and files/ into (required)")
}

func (o outFlag) validate() error { return nil }

// ParseRun reads run's flags, then fills the ones not given from their environment twins
// (getenv); help goes to out. It does not validate (Validate does).
func ParseRun(args []string, summary string, getenv func(string) string, out io.Writer) (*Run, error) {
	r := &Run{}
	f := newFlags("run", summary, out)
	r.register(f)
	if err := f.parse(args, getenv); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseOnce reads the flags of render or validate (cmd), as ParseRun does.
func ParseOnce(cmd string, args []string, summary string, getenv func(string) string, out io.Writer) (*Once, error) {
	o := &Once{Command: cmd}
	f := newFlags(cmd, summary, out)
	o.register(f)
	if err := f.parse(args, getenv); err != nil {
		return nil, err
	}
	return o, nil
}

// AllowedEnv keeps the variables of environ the operator allowed (allow: comma-separated exact
// names, or prefixes written NAME_*).
func AllowedEnv(allow string, environ []string) map[string]string {
	env := map[string]string{}
	var names, prefixes []string
	for _, a := range strings.Split(allow, ",") {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
		case strings.HasSuffix(a, "*"):
			prefixes = append(prefixes, strings.TrimSuffix(a, "*"))
		default:
			names = append(names, a)
		}
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		ok := false
		for _, n := range names {
			ok = ok || k == n
		}
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(k, p)
		}
		if ok {
			env[k] = v
		}
	}
	return env
}

// Env are the environment variables templates may read (--env-allow and --env-secret).
func (in *Inputs) Env() map[string]string {
	return AllowedEnv(in.EnvAllow+","+in.EnvSecret, os.Environ())
}

// SecretEnv are the values of --env-secret's variables.
func (in *Inputs) SecretEnv() []string {
	var out []string
	for _, v := range AllowedEnv(in.EnvSecret, os.Environ()) {
		out = append(out, v)
	}
	return out
}
