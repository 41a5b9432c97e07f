package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// envName is the environment-variable twin of a flag: upper snake case of its name.
func envName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its environment twin, so that
// the command line wins over the environment, which wins over the default.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("$%s=%q: %v", envName(f.Name), v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

// waitFlag is --wait MIN:MAX, like consul-template's wait.
type waitFlag struct{ min, max time.Duration }

func (w *waitFlag) String() string { return fmt.Sprintf("%s:%s", w.min, w.max) }

func (w *waitFlag) Set(s string) error {
	lo, hi, found := strings.Cut(s, ":")
	min, err := time.ParseDuration(lo)
	if err != nil {
		return fmt.Errorf("wait MIN: %w", err)
	}
	max := 4 * min
	if found {
		if max, err = time.ParseDuration(hi); err != nil {
			return fmt.Errorf("wait MAX: %w", err)
		}
	}
	if min < 0 || max < min {
		return fmt.Errorf("wait %q: want 0 <= MIN <= MAX", s)
	}
	w.min, w.max = min, max
	return nil
}

// usage prints a subcommand's help: what it does, then every flag with its environment twin.
func usage(fs *flag.FlagSet, summary string) func() {
	return func() {
		out := fs.Output()
		fmt.Fprintf(out, "%s\n\nFlags (each can also be set by the environment variable shown):\n", summary)
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		sort.Strings(names)
		for _, n := range names {
			f := fs.Lookup(n)
			typ, help := flag.UnquoteUsage(f)
			line := "  --" + n
			if typ != "" {
				line += " " + typ
			}
			fmt.Fprintf(out, "%s   [$%s]\n", line, envName(n))
			fmt.Fprintf(out, "      %s", strings.ReplaceAll(help, "\n", "\n      "))
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
				fmt.Fprintf(out, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(out)
		}
	}
}

func exitf(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "haproxy-sidecar: "+format+"\n", args...)
	os.Exit(code)
}

// commaList is a flag of comma-separated values; repeating the flag adds to it.
type commaList []string

func (c *commaList) String() string { return strings.Join(*c, ",") }

func (c *commaList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*c = append(*c, v)
		}
	}
	return nil
}
