package dataplanetest

import (
	"fmt"
	"slices"
	"strings"
)

// sectionKinds are the words that open a section.
var sectionKinds = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"userlist": true, "peers": true, "mailers": true, "resolvers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "fcgi-app": true, "log-forward": true,
	"crt-store": true, "traces": true, "acme": true,
}

// kindOrder is the order in which the API writes sections back, by kind; kinds not listed
// follow, in the order they came.
var kindOrder = []string{
	"global", "defaults", "traces", "userlist", "peers", "mailers", "resolvers", "cache",
	"program", "http-errors", "ring", "log-forward", "fcgi-app", "crt-store", "acme",
	"frontend", "backend", "listen",
}

type section struct {
	kind   string
	header []string // words of the header line
	lines  []string // the section's lines, trimmed; comments kept, blank lines dropped
}

// rewrite returns the configuration as the real Data Plane API stores it after a raw POST
// (its configuration parser writes back what it parsed): comments before the first section
// stay on top, anonymous defaults sections are named unnamed_defaults_1, _2..., sections are
// grouped by kind in kindOrder, each section's lines are indented by two spaces, and sections
// are separated by one blank line. When there are several defaults sections, every proxy
// without `from` gets `from <the defaults section above it>`, so that the reordered file
// means what was sent. A file with conditional blocks (.if) is only trimmed of blank lines:
// moving sections across conditions would change what it means.
func rewrite(text string) string {
	var top []string
	var secs []*section
	var cur *section
	conditional := false
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if strings.HasPrefix(f[0], ".") {
			conditional = true
		}
		if sectionKinds[f[0]] {
			cur = &section{kind: f[0], header: f}
			secs = append(secs, cur)
			continue
		}
		if cur == nil {
			top = append(top, line)
			continue
		}
		cur.lines = append(cur.lines, line)
	}
	if !conditional {
		nameDefaults(secs)
		secs = reorder(secs)
	}
	var b strings.Builder
	for _, l := range top {
		b.WriteString(l + "\n")
	}
	for i, sec := range secs {
		if i > 0 || len(top) > 0 {
			b.WriteString("\n")
		}
		b.WriteString(strings.Join(sec.header, " ") + "\n")
		for _, l := range sec.lines {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// nameDefaults names the anonymous defaults sections and, when there are several, makes each
// proxy's defaults explicit with `from`.
func nameDefaults(secs []*section) {
	n, count := 0, 0
	for _, s := range secs {
		if s.kind == "defaults" {
			count++
		}
	}
	last := ""
	for _, s := range secs {
		switch s.kind {
		case "defaults":
			if len(s.header) == 1 || s.header[1] == "from" {
				n++
				s.header = slices.Insert(s.header, 1, fmt.Sprintf("unnamed_defaults_%d", n))
			}
			last = s.header[1]
		case "frontend", "backend", "listen":
			if count > 1 && last != "" && !slices.Contains(s.header, "from") {
				s.header = append(s.header, "from", last)
			}
		}
	}
}

// reorder groups the sections by kind in kindOrder, keeping their order within a kind.
func reorder(secs []*section) []*section {
	rank := func(kind string) int {
		if i := slices.Index(kindOrder, kind); i >= 0 {
			return i
		}
		return len(kindOrder)
	}
	out := slices.Clone(secs)
	slices.SortStableFunc(out, func(a, b *section) int { return rank(a.kind) - rank(b.kind) })
	return out
}
