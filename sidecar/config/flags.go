// Package config is the sidecar's configuration: one type per concern (where the inputs come
// from, what they are, rendering, the files HAProxy reads, HAProxy and its reloads, the Data
// Plane API, leader election, HTTP, logs), each registering its own flags with their
// environment twins, defaults and validation, in the manner of consul-template's config
// package. A command's configuration (Run, Once) is the concerns it uses; Parse fills it from
// the command line, then the environment, then the defaults, and validates it.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// concern is one part of a command's configuration.
type concern interface {
	// title heads the concern's flags in the help.
	title() string
	// register adds the concern's flags, with their defaults, to fs.
	register(fs *flag.FlagSet)
	// validate checks the values once the command line and the environment are read.
	validate() error
}

// group is the flags of one concern, for the help.
type group struct {
	title string
	names []string
}

// flags is a command's flag set: the concerns' flags in groups, each with an environment
// twin.
type flags struct {
	fs      *flag.FlagSet
	groups  []group
	summary string
	// out gets the help and the deprecation warnings (the flag package prints nothing: a
	// mistake is one line, not the whole help).
	out io.Writer
	// types are the flags' value names in the help (duration, SIZE, file|kube|etcd).
	types map[string]string
}

func newFlags(cmd, summary string, out io.Writer) *flags {
	f := &flags{fs: flag.NewFlagSet(cmd, flag.ContinueOnError), summary: summary, out: out, types: map[string]string{}}
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	return f
}

// add registers the flags of each concern, in order, under its title.
func (f *flags) add(cs ...concern) {
	for _, c := range cs {
		f.addOne(c)
	}
}

func (f *flags) addOne(c concern) {
	before := map[string]bool{}
	f.fs.VisitAll(func(fl *flag.Flag) { before[fl.Name] = true })
	c.register(f.fs)
	g := group{title: c.title()}
	f.fs.VisitAll(func(fl *flag.Flag) {
		if !before[fl.Name] {
			g.names = append(g.names, fl.Name)
			f.types[fl.Name] = typeName(fl)
			fl.Value = explained(fl.Value)
		}
	})
	f.groups = append(f.groups, g)
}

// typeName is how the help names a flag's value.
func typeName(fl *flag.Flag) string {
	if c, ok := fl.Value.(*choice); ok {
		return strings.Join(c.values, "|")
	}
	typ, _ := flag.UnquoteUsage(fl)
	return typ
}

// parse reads args, then fills the flags not given from their environment twins.
func (f *flags) parse(args []string, getenv func(string) string) error {
	if err := f.fs.Parse(args); err != nil {
		return f.parseError(err)
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q (%s)", f.fs.Name(), f.fs.Args(), f.helpHint())
	}
	return applyEnv(f.fs, getenv, f.out)
}

// parseError turns the flag package's error into one line: a mistyped flag with the closest
// one, anything else with where the flags are listed; --help prints the help.
func (f *flags) parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		f.usage()
		return ErrHelp
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		if s := f.closest(name); s != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s? (%s)", name, s, f.helpHint())
		}
		return fmt.Errorf("unknown flag --%s (%s)", name, f.helpHint())
	}
	if m := badValue.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("--%s=%s: %s (%s)", m[2], m[1], m[3], f.helpHint())
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag needs an argument: "); ok {
		return fmt.Errorf("--%s needs a value (%s)", strings.TrimLeft(name, "-"), f.helpHint())
	}
	return fmt.Errorf("%w (%s)", err, f.helpHint())
}

// badValue is the flag package's error for a value a flag's Set refused: the value, the flag,
// why (Set's error, which says what the flag takes).
var badValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-(\S+): (.*)$`)

func (f *flags) helpHint() string {
	return "haproxy-sidecar " + f.fs.Name() + " --help lists the flags"
}

// closest is the flag nearest to name by edit distance, "" when none is near enough to be
// what was meant.
func (f *flags) closest(name string) string {
	best, bestD := "", -1
	f.fs.VisitAll(func(fl *flag.Flag) {
		if d := editDistance(name, fl.Name); bestD < 0 || d < bestD {
			best, bestD = fl.Name, d
		}
	})
	limit := 2
	if len(name) < 5 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two neighbours (the usual typos) cost 1 each.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// EnvPrefix starts the name of every flag's environment twin, so that a variable of someone's
// shell (OUT, DIR, WAIT) never sets a flag.
const EnvPrefix = "HAPROXY_SIDECAR_"

// EnvName is the environment-variable twin of a flag: EnvPrefix and the upper snake case of
// its name (--master-socket: HAPROXY_SIDECAR_MASTER_SOCKET).
func EnvName(flagName string) string {
	return EnvPrefix + oldEnvName(flagName)
}

// oldEnvName is the twin's name before the prefix (MASTER_SOCKET): still read, with a
// deprecation warning, except where keepsOldName says.
func oldEnvName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// keepsOldName says whether a flag's unprefixed twin stays without a warning: the seeds'
// STATISTICS_PASSWORD, and KUBECONFIG, which kubectl and client-go read too.
func keepsOldName(flagName string) bool {
	return flagName == "statistics-password" || flagName == "kubeconfig"
}

// EnvNames are the variables a flag is read from, in the order they win: the prefixed twin,
// then the unprefixed one where it is kept.
func EnvNames(flagName string) []string {
	if keepsOldName(flagName) {
		return []string{EnvName(flagName), oldEnvName(flagName)}
	}
	return []string{EnvName(flagName)}
}

// testSettings are the project's own variables that start with EnvPrefix and are no flag's
// twin: they tune its tests (docs/testing.md), not the program.
var testSettings = []string{"HAPROXY_SIDECAR_REQUIRE_TESTBINS", "HAPROXY_SIDECAR_HAPROXY_VERSION",
	"HAPROXY_SIDECAR_GOLDEN_INPUT", "HAPROXY_SIDECAR_CAPTURE"}

// UnknownEnv says, one line each, which variables of environ start with EnvPrefix but are the
// twin of no flag of any command (a typo the sidecar would otherwise ignore in silence),
// naming the closest twin when one is near enough to be what was meant. A variable another
// command reads is not unknown: one environment often serves run and validate alike.
func UnknownEnv(environ []string) []string {
	// Every flag of every command, compared as flag names (NAMESPCE as namespce), with the
	// limits of a mistyped flag.
	all := &flags{fs: flag.NewFlagSet("", flag.ContinueOnError)}
	for _, cmd := range []string{"run", "render", "validate", "diff"} {
		for _, name := range Names(cmd) {
			if len(name) > 1 && all.fs.Lookup(name) == nil {
				all.fs.String(name, "", "")
			}
		}
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(name, EnvPrefix)
		flagName := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		if !ok || (all.fs.Lookup(flagName) != nil && EnvName(flagName) == name) || slices.Contains(testSettings, name) {
			continue
		}
		msg := fmt.Sprintf("$%s is no flag's variable and is ignored", name)
		if c := all.closest(flagName); c != "" {
			msg += fmt.Sprintf(": did you mean $%s (--%s)?", EnvName(c), c)
		} else {
			msg += " (haproxy-sidecar COMMAND --help lists each flag with its variable)"
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return out
}

// envValue is a flag's value found in the environment, and the variable that gave it.
type envValue struct {
	name, value string
	deprecated  bool
}

// lookupEnv finds a flag's value: the prefixed twin wins over the unprefixed one.
func lookupEnv(flagName string, getenv func(string) string) (envValue, bool) {
	for _, n := range EnvNames(flagName) {
		if v := getenv(n); v != "" {
			return envValue{name: n, value: v}, true
		}
	}
	if keepsOldName(flagName) {
		return envValue{}, false
	}
	if v := getenv(oldEnvName(flagName)); v != "" {
		return envValue{name: oldEnvName(flagName), value: v, deprecated: true}, true
	}
	return envValue{}, false
}

// applyEnv sets every flag not given on the command line from its environment twin, so that
// the command line wins over the environment, which wins over the default. An unprefixed
// twin is one warning line on warn. An error names the variable and what it takes.
func applyEnv(fs *flag.FlagSet, getenv func(string) string, warn io.Writer) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || len(f.Name) == 1 { // a one-letter alias has its long name's twin
			return
		}
		ev, ok := lookupEnv(f.Name, getenv)
		if !ok {
			return
		}
		if ev.deprecated {
			fmt.Fprintf(warn, "haproxy-sidecar: warning: $%s is deprecated and will stop working: set $%s instead\n", ev.name, EnvName(f.Name))
		}
		if err := f.Value.Set(ev.value); err != nil {
			errs = append(errs, fmt.Sprintf("$%s=%q: %v", ev.name, ev.value, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// explained wraps the flag package's own values (bool, duration, numbers), whose errors say
// only "parse error", so that they say what the flag takes; other values say it themselves.
func explained(v flag.Value) flag.Value {
	g, ok := v.(flag.Getter)
	if !ok {
		return v
	}
	var want string
	switch g.Get().(type) {
	case bool:
		want = "want true or false"
	case time.Duration:
		want = "want a duration: 500ms, 30s, 2m, 1h"
	case int, int64, uint, uint64:
		want = "want a whole number"
	case float64:
		want = "want a number"
	default:
		return v
	}
	return &wanting{Value: v, want: want}
}

// wanting is a value whose Set errors say what it takes.
type wanting struct {
	flag.Value
	want string
}

func (w *wanting) Set(s string) error {
	if err := w.Value.Set(s); err != nil {
		return errors.New(w.want)
	}
	return nil
}

// IsBoolFlag keeps --flag (no value) working for the boolean flags.
func (w *wanting) IsBoolFlag() bool {
	b, ok := w.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// choice is a string flag that takes one of a few values (case does not matter).
type choice struct {
	p      *string
	values []string
}

// choiceVar registers a choice flag: *p is set to def, then to what is given.
func choiceVar(fs *flag.FlagSet, p *string, name, def string, values []string, usage string) {
	*p = def
	fs.Var(&choice{p: p, values: values}, name, usage)
}

func (c *choice) String() string {
	if c.p == nil {
		return ""
	}
	return *c.p
}

// Set takes one of the values.
func (c *choice) Set(s string) error {
	for _, v := range c.values {
		if strings.EqualFold(s, v) {
			*c.p = v
			return nil
		}
	}
	return fmt.Errorf("want %s", orList(c.values))
}

// orList is "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// usage prints a command's help: what it does, then its flags by concern, each with its
// environment twin.
func (f *flags) usage() {
	out := f.out
	fmt.Fprintf(out, "%s\n\nFlags (each can also be set by the environment variable shown; the command line wins):\n", f.summary)
	for _, g := range f.groups {
		if len(g.names) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", g.title)
		for _, n := range slices.Sorted(slices.Values(g.names)) {
			fl := f.fs.Lookup(n)
			_, help := flag.UnquoteUsage(fl)
			line := "  --" + n
			if typ := f.types[n]; typ != "" {
				line += " " + typ
			}
			if len(n) == 1 {
				fmt.Fprintf(out, "%s\n", strings.Replace(line, "--", "-", 1))
			} else {
				fmt.Fprintf(out, "%s   [$%s]\n", line, strings.Join(EnvNames(n), " or $"))
			}
			fmt.Fprintf(out, "      %s", strings.ReplaceAll(help, "\n", "\n      "))
			if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "[]" {
				fmt.Fprintf(out, " (default %s)", fl.DefValue)
			}
			fmt.Fprintln(out)
		}
	}
}

// Names lists the flags of a command ("run", "render", "validate" or "diff"), for
// documentation checks.
func Names(cmd string) []string {
	var c command
	switch cmd {
	case "run":
		c = &Run{}
	case "diff":
		c = &Diff{}
	default:
		c = &Once{Command: cmd}
	}
	f := newFlags(cmd, "", io.Discard)
	f.add(c.concerns()...)
	var out []string
	f.fs.VisitAll(func(fl *flag.Flag) { out = append(out, fl.Name) })
	return out
}

// ErrHelp is returned by Parse when --help was asked for (the help is printed).
var ErrHelp = flag.ErrHelp

// validateAll runs each concern's validation and joins the errors.
func validateAll(cs []concern) error {
	var errs []error
	for _, c := range cs {
		if err := c.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
