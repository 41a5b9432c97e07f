package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// List is a flag of comma-separated values; repeating the flag adds to it.
type List []string

func (c *List) String() string { return strings.Join(*c, ",") }

// Set adds the comma-separated values of s.
func (c *List) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*c = append(*c, v)
		}
	}
	return nil
}

// Repeated is a flag given once per value (paths may hold commas).
type Repeated []string

func (r *Repeated) String() string { return strings.Join(*r, " ") }

// Set adds one value.
func (r *Repeated) Set(s string) error {
	*r = append(*r, s)
	return nil
}

// Size is a size in bytes: 1048576, 512KiB, 64MiB, 1GiB (also KB, MB, GB: powers of 1000).
type Size int

func (s *Size) String() string {
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

// Set reads a size.
func (s *Size) Set(v string) error {
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
	*s = Size(n * mult)
	return nil
}

// Namespaces is --tls-secret-namespaces: comma-separated namespaces or *; repeating the flag
// adds to it.
type Namespaces struct {
	snapshot.Namespaces
	raw []string
}

// Set adds the namespaces of s.
func (n *Namespaces) Set(s string) error {
	v, err := snapshot.ParseNamespaces(strings.Join(append(append([]string{}, n.raw...), s), ","))
	if err != nil {
		return err
	}
	n.Namespaces, n.raw = v, append(n.raw, s)
	return nil
}
