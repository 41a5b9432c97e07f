// Package reload makes HAProxy load the configuration that is on disk, and confirms that it did.
package reload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Reloader makes HAProxy load the files that are live on disk. Reload returns only once the
// reload is confirmed (nil) or known to have failed (*Failed), or with ErrNotRunning, or with
// another error when the outcome could not be learnt.
type Reloader interface {
	Reload(ctx context.Context) error
}

// ErrNotRunning means HAProxy is not running (its socket is absent or refuses connections):
// nothing was reloaded, and HAProxy will load the live files when it starts.
var ErrNotRunning = errors.New("haproxy is not running")

// ErrRenderAgain means nothing was reloaded because the rendering does not fit the target
// any more (the Data Plane API hosts' certificate directory was just learnt): render again at
// once. It is neither bad input nor a failure.
var ErrRenderAgain = errors.New("the rendering is out of date: rendering again")

// Failed means the reload happened and HAProxy refused the new configuration; the workers of
// the previous configuration keep serving.
type Failed struct {
	Output string // what HAProxy (or the reload command) said, if anything
}

func (f *Failed) Error() string {
	msg := "haproxy refused to load the new configuration (the previous workers keep serving)"
	if s := summary(f.Output); s != "" {
		msg += ": " + s
	}
	return msg
}

// summary picks the [ALERT] lines of output (at most three), or its first non-empty line.
func summary(output string) string {
	var alerts []string
	first := ""
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if strings.HasPrefix(line, "[ALERT]") && len(alerts) < 3 {
			alerts = append(alerts, line)
		}
	}
	if len(alerts) > 0 {
		return strings.Join(alerts, "; ")
	}
	return first
}

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

// Defaults of MasterSocket.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultPollInterval = 20 * time.Millisecond
	// refusedGrace is how long a refused connection is retried before HAProxy is taken as not
	// running: the master refuses connections for a moment while it re-executes.
	refusedGrace = time.Second
)

// MasterSocket reloads through HAProxy's master CLI socket (haproxy -W -S path,level,admin).
type MasterSocket struct {
	Path string
	// Timeout bounds a whole reload, confirmation included (default DefaultTimeout). A large
	// configuration takes seconds to load.
	Timeout time.Duration
	// PollInterval is the pause between two `show proc` while waiting for the confirmation
	// (default DefaultPollInterval).
	PollInterval time.Duration
}

func (m *MasterSocket) timeout() time.Duration {
	if m.Timeout > 0 {
		return m.Timeout
	}
	return DefaultTimeout
}

func (m *MasterSocket) pollInterval() time.Duration {
	if m.PollInterval > 0 {
		return m.PollInterval
	}
	return DefaultPollInterval
}

// Proc is the master CLI's `show proc`.
type Proc struct {
	MasterPID int
	Reloads   int // reloads of the master, failed ones included
	Failed    int // failed reloads since the last successful one (0 after a success)
	Workers   int // workers of the current configuration
	// OldWorkers are workers of previous configurations still finishing their connections.
	OldWorkers int
	Version    string
	Raw        string
}

var failedRe = regexp.MustCompile(`\[failed:\s*(\d+)\]`)

// ParseProc parses the output of `show proc` (HAProxy 2.x and 3.x):
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	5693            master          4 [failed: 1]   0d00h00m11s     2.6.12-1+deb12u4
//	# workers
//	5850            worker          1               0d00h00m04s     2.6.12-1+deb12u4
//	# old workers
//	5837            worker          2               0d00h00m05s     2.6.12-1+deb12u4
//	# programs
//
// A worker's reloads column counts reloads since it started, failed ones included, so it does
// not tell old workers from current ones: the section does.
func ParseProc(out string) (Proc, error) {
	p := Proc{Raw: out, MasterPID: -1}
	section := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch f[1] {
		case "master":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				return Proc{Raw: out}, fmt.Errorf("parse show proc: master reloads %q: %w", f[2], err)
			}
			p.MasterPID, p.Reloads = pid, n
			if m := failedRe.FindStringSubmatch(line); m != nil {
				p.Failed, _ = strconv.Atoi(m[1])
			}
			p.Version = f[len(f)-1]
		case "worker":
			if strings.HasPrefix(section, "old") {
				p.OldWorkers++
			} else {
				p.Workers++
			}
		}
	}
	if p.MasterPID < 0 {
		return Proc{Raw: out}, fmt.Errorf("parse show proc: no master line in %q", strings.TrimSpace(out))
	}
	return p, nil
}

// ShowProc asks the master for `show proc`.
func (m *MasterSocket) ShowProc(ctx context.Context) (Proc, error) {
	out, err := m.Command(ctx, "show proc")
	if err != nil {
		return Proc{}, err
	}
	p, err := ParseProc(out)
	if err != nil {
		return p, fmt.Errorf("%s: %w", m.Path, err)
	}
	return p, nil
}

// LoadID identifies the configuration load HAProxy runs now: its master process and how many
// times that master has reloaded. It changes with every reload (by anyone) and every restart,
// so a sidecar that recorded it after its own reload can tell, after a restart of its own,
// whether HAProxy still runs what it loaded then.
func (m *MasterSocket) LoadID(ctx context.Context) (string, error) {
	p, err := m.ShowProc(ctx)
	if err != nil {
		return "", err
	}
	if p.Failed > 0 {
		// The last reload failed: the workers run an older load than the counter says.
		return "", fmt.Errorf("%s: the last reload failed", m.Path)
	}
	return fmt.Sprintf("master %d reload %d", p.MasterPID, p.Reloads), nil
}

// Command sends one command line to the master CLI, half-closes the connection (HAProxy
// answers and then waits for the client to close) and returns the whole answer. Prefix the
// command with "@1 " for the current worker. A connection that cannot be made because the
// socket is absent or refused wraps ErrNotRunning. The exchange is bounded by ctx and by
// Timeout.
func (m *MasterSocket) Command(ctx context.Context, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	return m.exchange(ctx, cmd, false)
}

// exchange runs one command; with closeOK, a connection the server drops before answering
// (as the 2.6 master does on reload) is not an error.
func (m *MasterSocket) exchange(ctx context.Context, cmd string, closeOK bool) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", m.Path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return "", fmt.Errorf("connect to %s: %w (%w)", m.Path, ErrNotRunning, err)
		}
		return "", fmt.Errorf("connect to %s: %w", m.Path, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", m.ioErr(ctx, cmd, "send", err, closeOK)
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return "", m.ioErr(ctx, cmd, "half-close", err, closeOK)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return string(out), m.ioErr(ctx, cmd, "read answer", err, closeOK)
	}
	return string(out), nil
}

func (m *MasterSocket) ioErr(ctx context.Context, cmd, what string, err error, closeOK bool) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	} else if closeOK && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return nil
	}
	return fmt.Errorf("%s %q on %s: %w", what, cmd, m.Path, err)
}

var successRe = regexp.MustCompile(`(?m)^Success=([01])\s*$`)

// Reload sends `reload` to the master and waits for the outcome. HAProxy 2.7 and later answer
// the command with "Success=1" or "Success=0" followed by the startup logs. HAProxy 2.6 answers
// nothing: the master re-executes itself, and the outcome shows in `show proc` once its reload
// counter has moved (success iff the failed counter is then 0).
func (m *MasterSocket) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	start := time.Now()

	before, err := m.showProcRetryRefused(ctx)
	if err != nil {
		return fmt.Errorf("reload via %s: %w", m.Path, err)
	}
	out, err := m.exchange(ctx, "reload", true)
	if err != nil {
		return fmt.Errorf("reload via %s: %w", m.Path, err)
	}
	if mm := successRe.FindStringSubmatch(out); mm != nil {
		if mm[1] == "1" {
			return nil
		}
		return &Failed{Output: startupLogs(out)}
	}

	// 2.6: poll show proc until the reload counter moves. While the master re-executes,
	// connections are refused or dropped without an answer: retry them.
	var last Proc
	var lastErr error
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		out, err := m.exchange(attemptCtx, "show proc", false)
		cancelAttempt()
		if err == nil {
			p, perr := ParseProc(out)
			switch {
			case perr != nil:
				lastErr = perr // an empty answer: the master went away mid-request
			case p.MasterPID != before.MasterPID || p.Reloads > before.Reloads:
				// Moved (or HAProxy was restarted, which also loads the live files).
				if p.Failed == 0 {
					return nil
				}
				return &Failed{Output: m.failureOutput(ctx, p)}
			default:
				last, lastErr = p, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reload via %s: not confirmed after %v (reload counter still %d, last show proc %q, last error %v): %w",
				m.Path, time.Since(start).Round(time.Millisecond), before.Reloads, strings.TrimSpace(last.Raw), lastErr, ctx.Err())
		case <-time.After(m.pollInterval()):
		}
	}
}

// showProcRetryRefused is ShowProc that retries a refused connection for a moment (a reload
// someone else started may be under way) before concluding HAProxy is not running.
func (m *MasterSocket) showProcRetryRefused(ctx context.Context) (Proc, error) {
	graceCtx, cancel := context.WithTimeout(ctx, refusedGrace)
	defer cancel()
	for {
		p, err := m.ShowProc(ctx)
		if err == nil || !errors.Is(err, ErrNotRunning) || errors.Is(err, syscall.ENOENT) {
			return p, err
		}
		select {
		case <-graceCtx.Done():
			return p, err
		case <-time.After(m.pollInterval()):
		}
	}
}

// failureOutput gathers what can be said about a failed reload. HAProxy 2.6 keeps the reason
// on the master's stderr only (its master CLI has no `show startup-logs`); newer versions
// answer `show startup-logs` on the master CLI.
func (m *MasterSocket) failureOutput(ctx context.Context, p Proc) string {
	msg := fmt.Sprintf("reload %d failed (%d failed since the last successful reload); the reason is in HAProxy's log", p.Reloads, p.Failed)
	logCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if logs, err := m.exchange(logCtx, "show startup-logs", false); err == nil && strings.TrimSpace(logs) != "" && !strings.HasPrefix(logs, "Unknown command") {
		msg = strings.TrimSpace(logs) + "\n" + msg
	}
	return msg + "\n" + strings.TrimSpace(p.Raw)
}

// startupLogs is the part of a 2.7+ reload answer after the "--" separator.
func startupLogs(out string) string {
	if i := strings.Index(out, "\n--\n"); i >= 0 {
		return strings.TrimSpace(out[i+4:])
	}
	return strings.TrimSpace(out)
}
