// Package validate checks a configuration with HAProxy itself (`haproxy -c`), so that a config
// HAProxy would refuse never goes live.
package validate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
)

// Checker runs `haproxy -c`.
type Checker struct {
	// Binary is the haproxy executable; "haproxy" (looked up in PATH) when empty.
	Binary string
}

func (c Checker) binary() string {
	if c.Binary == "" {
		return "haproxy"
	}
	return c.Binary
}

// Check runs `haproxy -c -f cfgPath` with stdin closed, bounded by ctx. It returns nil when
// HAProxy accepts the configuration, a *CheckError when HAProxy ran and rejected it (exit code
// 1 or 2), and any other error (wrapped) when HAProxy could not be run or did not finish.
func (c Checker) Check(ctx context.Context, cfgPath string) error {
	_, err := c.CheckWarnings(ctx, cfgPath)
	return err
}

// CheckWarnings is Check, and what HAProxy warned about in a configuration it accepted (first
// lines of its [WARNING]s, positions named as in haproxy.cfg).
func (c Checker) CheckWarnings(ctx context.Context, cfgPath string) ([]string, error) {
	bin := c.binary()
	cmd := exec.CommandContext(ctx, bin, "-c", "-f", cfgPath)
	cmd.Stdin = nil // /dev/null
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = time.Second // do not wait for a stray child holding the output pipe
	err := cmd.Run()
	if err == nil {
		return warnings(out.String()), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, fmt.Errorf("check %s with %s: %w", cfgPath, bin, ctxErr)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if code := exitErr.ExitCode(); code == 1 || code == 2 {
			return nil, newCheckError(out.String())
		}
		return nil, fmt.Errorf("check %s with %s: %w: %s", cfgPath, bin, err, strings.TrimSpace(out.String()))
	}
	return nil, fmt.Errorf("check %s with %s: %w", cfgPath, bin, err)
}

// warningPrefix matches the level tag and pid of a warning (2.6 adds "config : ").
var warningPrefix = regexp.MustCompile(`^\[WARNING\]\s*\(\d+\)\s*:\s*(config\s*:\s*)?`)

// warnings are the first lines of HAProxy's [WARNING]s in output, the file of a position
// ("parsing [/stage/check.cfg:12]") named haproxy.cfg.
func warnings(output string) []string {
	var out []string
	for _, line := range strings.Split(output, "\n") {
		loc := warningPrefix.FindStringIndex(line)
		if loc == nil {
			continue
		}
		msg := strings.TrimSpace(line[loc[1]:])
		msg = position.ReplaceAllString(msg, "[haproxy.cfg:$2]")
		out = append(out, msg)
	}
	return out
}

// Available reports whether binary (or "haproxy" when empty) can be found and executed.
func Available(binary string) bool {
	if binary == "" {
		binary = "haproxy"
	}
	_, err := exec.LookPath(binary)
	return err == nil
}

// CheckError is HAProxy's rejection of a configuration.
type CheckError struct {
	Output string   // everything `haproxy -c` printed
	Alerts []string // the [ALERT] lines, without the "[ALERT] (pid) : " and "config : " prefixes
	// File and Line locate the first alert that names a config position ("parsing [file:LINE]"),
	// zero values when HAProxy names none.
	File string
	Line int
}

// alertPrefix matches the level tag and pid HAProxy puts before every message.
var alertPrefix = regexp.MustCompile(`^\[ALERT\]\s*\(\d+\)\s*:\s*`)

// position matches "[file:LINE]" as in "parsing [haproxy.cfg:12]" or "Binding [haproxy.cfg:19]".
var position = regexp.MustCompile(`\[([^\[\]\s]+):(\d+)\]`)

func newCheckError(output string) *CheckError {
	e := &CheckError{Output: output}
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimRight(line, "\r ")
		loc := alertPrefix.FindStringIndex(line)
		if loc == nil {
			// Continuation lines of a multi-line message start with "   | ".
			if n := len(e.Alerts); n > 0 && strings.HasPrefix(strings.TrimSpace(line), "| ") {
				e.Alerts[n-1] += " " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "|"))
			}
			continue
		}
		msg := strings.TrimSpace(strings.TrimPrefix(line[loc[1]:], "config : "))
		e.Alerts = append(e.Alerts, msg)
		if e.Line == 0 {
			if m := position.FindStringSubmatch(msg); m != nil {
				e.File = m[1]
				e.Line, _ = strconv.Atoi(m[2])
			}
		}
	}
	return e
}

// Withhold is e without HAProxy's words about the lines that hold a secret (see
// content.SecretLines.Withhold): what a message may say of it.
func (e *CheckError) Withhold(secret content.SecretLines) *CheckError {
	if len(secret) == 0 {
		return e
	}
	w := *e
	w.Output = secret.Withhold(e.Output)
	w.Alerts = make([]string, len(e.Alerts))
	for i, a := range e.Alerts {
		w.Alerts[i] = secret.Withhold(a)
	}
	return &w
}

// generic reports whether an alert only summarises the ones before it.
func generic(alert string) bool {
	return strings.HasPrefix(alert, "Error(s) found in configuration file") ||
		strings.HasPrefix(alert, "Fatal errors found in configuration")
}

// Error names the first specific alerts (at most three), or HAProxy's last words when it
// printed no alert (an empty configuration exits 2 with only a notice).
func (e *CheckError) Error() string {
	var specific []string
	for _, a := range e.Alerts {
		if !generic(a) {
			specific = append(specific, a)
		}
	}
	if len(specific) == 0 {
		specific = e.Alerts
	}
	if len(specific) == 0 {
		return "haproxy rejected the configuration: " + lastLine(e.Output)
	}
	const max = 3
	msg := strings.Join(specific[:min(len(specific), max)], "; ")
	if len(specific) > max {
		msg += fmt.Sprintf(" (and %d more)", len(specific)-max)
	}
	return "haproxy rejected the configuration: " + msg
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "[NOTICE]") {
			return l
		}
	}
	if s = strings.TrimSpace(s); s != "" {
		return s
	}
	return "no output"
}
