package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
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
	Rollout   Rollout
	Leader    Leader
	Peers     Peers
	Publish   Publish
	HTTP      HTTP
	Webhook   Webhook
	Memory    Memory
	Log       Log
}

func (r *Run) concerns() []concern {
	return []concern{&r.Source, &r.Inputs, &r.Render, &r.Dirs, &r.HAProxy, &r.Wait, &r.Dataplane, &r.Rollout,
		&r.Leader, &r.Peers, &r.Publish, &r.HTTP, &r.Webhook, &r.Memory, &r.Log}
}

// Validate checks the configuration as a whole.
func (r *Run) Validate() error {
	if err := validateAll(r.concerns()); err != nil {
		return err
	}
	if r.Leader.Elect && r.Source.Kind != "kube" {
		return errors.New("--leader-elect needs --source=kube")
	}
	if err := checkPeers(r.Peers, r.Source.Kind); err != nil {
		return err
	}
	if r.Rollout.Canary() && !r.HAProxy.Remote() {
		return errors.New("--rollout=canary needs --reload=dataplane: a canary is one of several remote hosts")
	}
	if r.Publish.Set() && r.Source.Kind != "kube" {
		return errors.New("--publish-service and --publish-address need --source=kube")
	}
	if r.Dataplane.Mode == "servers" && !r.HAProxy.Remote() {
		return errors.New("--dataplane-mode=servers needs --reload=dataplane")
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
	Peers   Peers
	Log     Log
	// Out is where render writes haproxy.cfg, certs/, maps/ and files/.
	Out string
	// HAProxyConfig is validate's --haproxy-config: the directories templates name default
	// beside it, as run's do, so that validate prints the hash run would make live there.
	HAProxyConfig string
}

func (o *Once) concerns() []concern {
	cs := []concern{&o.Source, &o.Inputs, &o.Render, &o.Dirs, &o.Peers, &o.Log}
	switch o.Command {
	case "render":
		cs = append(cs, outFlag{&o.Out})
	case "validate":
		cs = append(cs, besideFlag{&o.HAProxyConfig})
	}
	return cs
}

// Validate checks the configuration as a whole.
func (o *Once) Validate() error {
	if err := validateAll(o.concerns()); err != nil {
		return err
	}
	if o.Command == "render" && o.Out == "" {
		return errors.New("render needs --out DIR")
	}
	return checkPeers(o.Peers, o.Source.Kind)
}

// Diff is `haproxy-sidecar diff`: what a proposed state of the inputs would do, against the
// current one, without acting.
type Diff struct {
	Source Source
	Inputs Inputs
	Render Render
	Dirs   Dirs
	Peers  Peers
	Log    Log
	// Live is the state directory of a running sidecar (its live generation and last good
	// inputs); Base a directory of manifests to render as the current state instead.
	Live, Base string
	// HAProxyConfig is the running sidecar's --haproxy-config: the directories templates
	// name default beside it, as run's do.
	HAProxyConfig string
	// Overlays are manifest files whose objects replace or add to the source's; Deletes are
	// objects (KIND/NAMESPACE/NAME) taken out of it.
	Overlays, Deletes Repeated
	// Output is text or json.
	Output string
	// EnvMismatch is what diff --live does when the running sidecar renders with another
	// environment than diff: fail, or warn and predict with diff's.
	EnvMismatch string
}

func (d *Diff) concerns() []concern {
	return []concern{&d.Source, &d.Inputs, &d.Render, &d.Dirs, &d.Peers, &d.Log, diffFlags{d}}
}

// Validate checks the configuration as a whole.
func (d *Diff) Validate() error {
	if err := validateAll(d.concerns()); err != nil {
		return err
	}
	switch {
	case (d.Live == "") == (d.Base == ""):
		return errors.New("diff needs one of --live STATE_DIR (a running sidecar's state directory) or --base DIR (manifests of the current state)")
	case d.Output != "text" && d.Output != "json":
		return fmt.Errorf("--output %q: want text or json", d.Output)
	}
	for _, del := range d.Deletes {
		if strings.Count(del, "/") != 2 {
			return fmt.Errorf("--delete %q: want KIND/NAMESPACE/NAME (Pod/shop/web-1, ConfigMap/lb/services)", del)
		}
	}
	return checkPeers(d.Peers, d.Source.Kind)
}

type diffFlags struct{ d *Diff }

func (diffFlags) title() string { return "What to compare" }

func (f diffFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.d.Live, "live", "", "`STATE_DIR` of a running sidecar (--state-dir; default beside its --haproxy-config: .haproxy-sidecar): compare with what it made live, and hold inputs as it would")
	fs.StringVar(&f.d.HAProxyConfig, "haproxy-config", DefaultHAProxyConfig, "the running sidecar's --haproxy-config: the directories templates name (ssldir, mapsdir, filesdir) default beside it, as run's do, so that the renderings compare")
	fs.StringVar(&f.d.Base, "base", "", "`DIR` of manifests that is the current state, rendered as the proposed one is (instead of --live)")
	fs.Var(&f.d.Overlays, "file", "`FILE` of manifests whose objects replace or add to the proposed source's (repeatable): the changed objects to try against the live cluster")
	fs.Var(&f.d.Overlays, "f", "short for --file")
	fs.Var(&f.d.Deletes, "delete", "`KIND/NAMESPACE/NAME` of an object taken out of the proposed state (repeatable)")
	fs.StringVar(&f.d.Output, "output", "text", "text or json")
	fs.StringVar(&f.d.Output, "o", "text", "short for --output")
	choiceVar(fs, &f.d.EnvMismatch, "env-mismatch", "fail", []string{"fail", "warn"}, "with --live, when the running sidecar's templates see other environment variables (--env-allow, --env-secret) or another statistics password than diff's: fail (naming them), or warn and predict with diff's")
}

func (f diffFlags) validate() error { return nil }

// ParseDiff reads diff's flags, as ParseRun does.
func ParseDiff(args []string, summary string, getenv func(string) string, out io.Writer) (*Diff, error) {
	d := &Diff{}
	if err := parse(d, "diff", args, summary, getenv, out); err != nil {
		return nil, err
	}
	d.Peers.fromDownwardAPI(getenv)
	return d, nil
}

type outFlag struct{ out *string }

func (outFlag) title() string { return "Output" }

func (o outFlag) register(fs *flag.FlagSet) {
	fs.StringVar(o.out, "out", "", "directory to write haproxy.cfg, certs/, maps/ and files/ into (required)")
}

func (o outFlag) validate() error { return nil }

// besideFlag is validate's --haproxy-config (run's is the HAProxy concern's, diff's among its
// own flags): where run's HAProxy reads, so that the paths templates print are run's.
type besideFlag struct{ config *string }

func (besideFlag) title() string { return "Where run writes" }

func (b besideFlag) register(fs *flag.FlagSet) {
	fs.StringVar(b.config, "haproxy-config", DefaultHAProxyConfig, "run's --haproxy-config: the directories templates name (ssldir, mapsdir, filesdir) default beside it, as run's do, so that the hash printed is the one run would make live")
}

func (besideFlag) validate() error { return nil }

// ParseRun reads run's flags, then fills the ones not given from their environment twins
// (getenv); help goes to out. It does not validate (Validate does).
func ParseRun(args []string, summary string, getenv func(string) string, out io.Writer) (*Run, error) {
	r := &Run{}
	if err := parse(r, "run", args, summary, getenv, out); err != nil {
		return nil, err
	}
	if r.Peers.Name == "" {
		r.Peers.Name = r.Leader.PodName // --pod-name names this instance everywhere else
	}
	r.Peers.fromDownwardAPI(getenv)
	return r, nil
}

// ParseOnce reads the flags of render or validate (cmd), as ParseRun does.
func ParseOnce(cmd string, args []string, summary string, getenv func(string) string, out io.Writer) (*Once, error) {
	o := &Once{Command: cmd}
	if err := parse(o, cmd, args, summary, getenv, out); err != nil {
		return nil, err
	}
	o.Peers.fromDownwardAPI(getenv)
	return o, nil
}

// command is one command's configuration: the concerns it is made of.
type command interface {
	// concerns are the command's concerns, in the order of its help; the same list gives
	// the flags and is validated.
	concerns() []concern
}

// parse fills c from the command line (args) of command name, then from the environment.
func parse(c command, name string, args []string, summary string, getenv func(string) string, out io.Writer) error {
	f := newFlags(name, summary, out)
	f.add(c.concerns()...)
	return f.parse(args, getenv)
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

// SecretEnvNames are the names of --env-secret's variables, sorted.
func (in *Inputs) SecretEnvNames() []string {
	return slices.Sorted(maps.Keys(AllowedEnv(in.EnvSecret, os.Environ())))
}

// SecretEnv are the values of --env-secret's variables.
func (in *Inputs) SecretEnv() []string {
	var out []string
	for _, v := range AllowedEnv(in.EnvSecret, os.Environ()) {
		out = append(out, v)
	}
	return out
}
