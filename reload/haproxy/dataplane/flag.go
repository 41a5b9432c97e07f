package dataplane

import (
	"net/url"
	"strings"
)

// URLs is a flag.Value for --dataplane-url: repeatable, and each value may hold several
// comma-separated URLs. String shows them without credentials.
type URLs []string

// String lists the URLs, comma-separated, with any password in them redacted.
func (u *URLs) String() string {
	if u == nil {
		return ""
	}
	out := make([]string, 0, len(*u))
	for _, s := range *u {
		if p, err := url.Parse(s); err == nil {
			s = p.Redacted()
		} else {
			s = "(invalid URL)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

// Set appends the comma-separated URLs of v.
func (u *URLs) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u = append(*u, s)
		}
	}
	return nil
}
