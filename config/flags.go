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
	"slices"
	"strings"
)

// concern is one part of a command's configuration.
type concern interface {
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
}

func newFlags(cmd, summary string, out io.Writer) *flags {
	f := &flags{fs: flag.NewFlagSet(cmd, flag.ContinueOnError), summary: summary}
	f.fs.SetOutput(out)
	f.fs.Usage = f.usage
	return f
}

// add registers a concern's flags under title.
func (f *flags) add(title string, c concern) {
	before := map[string]bool{}
	f.fs.VisitAll(func(fl *flag.Flag) { before[fl.Name] = true })
	c.register(f.fs)
	g := group{title: title}
	f.fs.VisitAll(func(fl *flag.Flag) {
		if !before[fl.Name] {
			g.names = append(g.names, fl.Name)
		}
	})
	f.groups = append(f.groups, g)
}

// parse reads args, then fills the flags not given from their environment twins.
func (f *flags) parse(args []string, getenv func(string) string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", f.fs.Name(), f.fs.Args())
	}
	return applyEnv(f.fs, getenv)
}

// EnvName is the environment-variable twin of a flag: upper snake case of its name.
func EnvName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its environment twin, so that
// the command line wins over the environment, which wins over the default.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || len(f.Name) == 1 { // a one-letter alias has its long name's twin
			return
		}
		if v := getenv(EnvName(f.Name)); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("$%s=%q: %v", EnvName(f.Name), v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// usage prints a command's help: what it does, then its flags by concern, each with its
// environment twin.
func (f *flags) usage() {
	out := f.fs.Output()
	fmt.Fprintf(out, "%s\n\nFlags (each can also be set by the environment variable shown):\n", f.summary)
	for _, g := range f.groups {
		if len(g.names) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", g.title)
		for _, n := range slices.Sorted(slices.Values(g.names)) {
			fl := f.fs.Lookup(n)
			typ, help := flag.UnquoteUsage(fl)
			line := "  --" + n
			if typ != "" {
				line += " " + typ
			}
			if len(n) == 1 {
				fmt.Fprintf(out, "%s\n", strings.Replace(line, "--", "-", 1))
			} else {
				fmt.Fprintf(out, "%s   [$%s]\n", line, EnvName(n))
			}
			fmt.Fprintf(out, "      %s", strings.ReplaceAll(help, "\n", "\n      "))
			if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "[]" {
				fmt.Fprintf(out, " (default %s)", fl.DefValue)
			}
			fmt.Fprintln(out)
		}
	}
}

// Names lists the flags of a command ("run", "render" or "validate"), for documentation
// checks.
func Names(cmd string) []string {
	f := newFlags(cmd, "", io.Discard)
	switch cmd {
	case "run":
		(&Run{}).register(f)
	case "diff":
		(&Diff{}).register(f)
	default:
		(&Once{Command: cmd}).register(f)
	}
	var out []string
	f.fs.VisitAll(func(fl *flag.Flag) { out = append(out, fl.Name) })
	return out
}

// ErrHelp is returned by Parse when --help was asked for (the help is printed).
var ErrHelp = flag.ErrHelp

// validateAll runs each concern's validation and joins the errors.
func validateAll(cs ...concern) error {
	var errs []error
	for _, c := range cs {
		if err := c.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
