package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
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

// sizeFlag is a size in bytes: 1048576, 512KiB, 64MiB, 1GiB (also KB, MB, GB: powers of 1000).
type sizeFlag int

func (s *sizeFlag) String() string {
	n := int(*s)
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.Itoa(n)
}

func (s *sizeFlag) Set(v string) error {
	t := strings.TrimSpace(v)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return fmt.Errorf("size %q: want a number of bytes, optionally with KiB, MiB or GiB", v)
	}
	mult := map[string]int64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1e3, "mb": 1e6, "gb": 1e9}[strings.ToLower(strings.TrimSpace(t[i:]))]
	if mult == 0 {
		return fmt.Errorf("size %q: unknown unit %q (want KiB, MiB, GiB, KB, MB, GB or none)", v, t[i:])
	}
	if n <= 0 || n > (1<<40)/mult {
		return fmt.Errorf("size %q: want more than 0 and at most 1TiB", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}
