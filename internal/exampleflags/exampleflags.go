// Package exampleflags reads the flags an example template's header comment says the sidecar
// needs (`#   --watch ...` lines, `--env-allow ...`), so that the end-to-end tests, the Gateway
// API conformance run and the route benchmark run each example as it tells its users to, and
// follow it when it changes.
package exampleflags

import (
	"errors"
	"regexp"
)

var (
	// watchLine is a comment line that gives one --watch value, quoted or not.
	watchLine = regexp.MustCompile(`(?m)^#\s+--watch\s+'?([^'\s]+)'?\s*$`)
	envAllow  = regexp.MustCompile(`--env-allow\s+([A-Z0-9_,]+)`)
)

// Watch are the --watch values the header lists, in order.
func Watch(example []byte) []string {
	var out []string
	for _, m := range watchLine.FindAllSubmatch(example, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// EnvAllow is the --env-allow value the header gives ("" when none).
func EnvAllow(example []byte) string {
	if m := envAllow.FindSubmatch(example); m != nil {
		return string(m[1])
	}
	return ""
}

// Args are the --watch and --env-allow flags the header lists; an error when it lists no
// --watch or no --env-allow.
func Args(example []byte) ([]string, error) {
	var args []string
	for _, w := range Watch(example) {
		args = append(args, "--watch", w)
	}
	env := EnvAllow(example)
	if len(args) == 0 || env == "" {
		return nil, errors.New("the header comment lists no --watch or no --env-allow")
	}
	return append(args, "--env-allow", env), nil
}
