// Package reload makes HAProxy load the configuration that is on disk, and confirms that it did.
package reload

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// Reloader makes HAProxy load the files that are live on disk. Reload returns only once the
// reload is confirmed (nil) or known to have failed (*Failed), or with ErrNotRunning, or with
// another error when the outcome could not be learnt.
type Reloader interface {
	Reload(ctx context.Context) error
}

// ErrNotRunning means HAProxy is not running (its socket is absent or refuses connections):
// nothing was reloaded, and HAProxy will load the live files when it starts.
var ErrNotRunning = cli.ErrNotRunning

// ErrRenderAgain means nothing was reloaded because the rendering does not fit the target
// any more (the Data Plane API hosts' certificate directory was just learnt): render again at
// once. It is neither bad input nor a failure.
var ErrRenderAgain = errors.New("the rendering is out of date: rendering again")

// Failed means the reload happened and HAProxy refused the new configuration; the workers of
// the previous configuration keep serving.
type Failed struct {
	// Output is what HAProxy (or the reload command) said: from HAProxy 2.7 on, the start-up
	// logs of the refused load, whose alerts give the reason.
	Output string
}

func (f *Failed) Error() string {
	msg := "haproxy refused to load the new configuration (the previous workers keep serving)"
	if s := f.Reason(); s != "" {
		msg += ": " + s
	}
	return msg
}

// Reason is HAProxy's own reason for refusing the configuration: its specific alert lines (at
// most three, without the "[ALERT] (pid) :" prefix; generic ones such as "Fatal errors found in
// configuration." only when there is nothing else), or the first line of Output.
func (f *Failed) Reason() string {
	var specific, generic []string
	first := ""
	for _, line := range strings.Split(f.Output, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		m := alertRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if genericAlertRe.MatchString(m[1]) {
			generic = append(generic, m[1])
		} else {
			specific = append(specific, m[1])
		}
	}
	alerts := specific
	if len(alerts) == 0 {
		alerts = generic
	}
	if len(alerts) > 3 {
		alerts = alerts[:3]
	}
	if len(alerts) > 0 {
		return strings.Join(alerts, "; ")
	}
	return first
}

var (
	// "[ALERT]    (4620) : Binding [...] ..." (HAProxy 2.4+), or "[ALERT] ..." from a command.
	alertRe = regexp.MustCompile(`^\[ALERT\]\s*(?:\(\d+\)\s*:\s*)?(.*)$`)
	// Alerts that only say that something failed; the line before them says what.
	genericAlertRe = regexp.MustCompile(`Fatal errors found in configuration|Error\(s\) found in configuration file|failed to start their listeners|Loading failure`)
)

// None is a Reloader that does nothing: the files are written and whoever runs HAProxy
// reloads it.
type None struct{}

// Reload does nothing.
func (None) Reload(context.Context) error { return nil }

// Command reloads by running a command (for example `systemctl reload haproxy`): exit status 0
// is success, another status is *Failed with the command's output.
type Command struct {
	Argv []string
}

// Reload runs the command, bounded by ctx.
func (c Command) Reload(ctx context.Context) error {
	if len(c.Argv) == 0 {
		return errors.New("reload command: no command configured")
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("reload command %q: %w", c.Argv, ctxErr)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return &Failed{Output: fmt.Sprintf("reload command %q: %v\n%s", c.Argv, err, out)}
	}
	return fmt.Errorf("reload command %q: %w: %s", c.Argv, err, strings.TrimSpace(string(out)))
}
