package reload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// Defaults of MasterSocket.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultPollInterval = 20 * time.Millisecond
	// DefaultRefusedGrace is how long a refused connection is retried before HAProxy is taken
	// as not running: the master refuses connections while it re-executes, which takes 2.6 as
	// long as parsing the configuration (seconds for a large one).
	DefaultRefusedGrace = 5 * time.Second
	// busyFirst and busyMax bound the pause before asking again for a reload that HAProxy
	// (3.1+) turned down because another one is still starting its worker.
	busyFirst = 50 * time.Millisecond
	busyMax   = time.Second
	// attemptTimeout bounds one `show proc` while waiting for a confirmation.
	attemptTimeout = 2 * time.Second
)

// MasterSocket reloads through HAProxy's master CLI socket (haproxy -W -S path,level,admin).
type MasterSocket struct {
	Path string
	// Timeout bounds a whole reload, confirmation and retries included (default
	// DefaultTimeout), and each Command. A large configuration takes seconds to load.
	Timeout time.Duration
	// PollInterval is the pause between two `show proc` while waiting for the confirmation
	// of HAProxy 2.6 (default DefaultPollInterval).
	PollInterval time.Duration
	// RefusedGrace is how long a socket that refuses connections is retried before Reload
	// returns ErrNotRunning (default DefaultRefusedGrace).
	RefusedGrace time.Duration
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

func (m *MasterSocket) client(timeout time.Duration) *cli.Client {
	return &cli.Client{Path: m.Path, Timeout: timeout}
}

// Command sends one command line to the master CLI and returns the whole answer (see
// cli.Client.Command). Prefix the command with "@1 " for the current worker. A socket
// that is absent or refused wraps ErrNotRunning. The exchange is bounded by ctx and by Timeout.
func (m *MasterSocket) Command(ctx context.Context, cmd string) (string, error) {
	return m.client(m.timeout()).Command(ctx, cmd)
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

// Reload sends `reload` to the master and waits for the outcome, using what the version offers:
//
//   - 2.7 and later answer the command itself once the new workers run, or once they failed:
//     "Success=1", or "Success=0" and the start-up logs whose alerts are HAProxy's reason
//     (*Failed carries them). The answer is read until HAProxy closes the connection,
//     however long the load takes (within Timeout).
//   - 3.1 and later turn a reload down while the worker of a previous one is still starting
//     ("Another reload is still in progress."): it is asked again, with a growing pause,
//     within Timeout. It is never taken for a refused configuration.
//   - 2.6 answers nothing: the master re-executes itself, and the outcome shows in `show proc`
//     once its reload counter has moved (success iff the failed counter is then 0). A newer
//     master that drops the connection (another reload replaced this one) is confirmed the
//     same way, then asked for the status of its last load (`_loadstatus`, which from 3.1 on
//     waits for a starting worker).
func (m *MasterSocket) Reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	start := time.Now()
	busy := 0
	fail := func(err error) error {
		if busy > 0 && ctx.Err() != nil {
			return fmt.Errorf("reload via %s: another reload was still in progress for %v (HAProxy turned this one down %d times): %w",
				m.Path, time.Since(start).Round(time.Millisecond), busy, ctx.Err())
		}
		return fmt.Errorf("reload via %s: %w", m.Path, err)
	}
	for {
		before, err := m.showProcRetryRefused(ctx)
		if err != nil {
			return fail(err)
		}
		out, err := m.commandRetryRefused(ctx, "reload")
		if err != nil && cli.Dropped(err) && ctx.Err() == nil {
			out, err = "", nil // 2.6: the master re-executes without answering
		}
		if err != nil {
			return fail(err)
		}
		a := ParseAnswer(out)
		switch a.Outcome {
		case Loaded:
			return nil
		case Refused:
			return &Failed{Output: a.Logs}
		case Busy:
			pause := min(busyFirst<<min(busy, 8), busyMax)
			busy++
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(pause):
			}
			continue
		}
		return m.confirm(ctx, before, start)
	}
}

// confirm waits until `show proc` shows a reload after before, then learns its outcome.
func (m *MasterSocket) confirm(ctx context.Context, before Proc, start time.Time) error {
	var last Proc
	var lastErr error
	for {
		// While the master re-executes, connections are refused or dropped without an
		// answer: retry them.
		out, err := m.client(attemptTimeout).Command(ctx, "show proc")
		if err == nil {
			p, perr := ParseProc(out)
			switch {
			case perr != nil:
				lastErr = perr // an empty answer: the master went away mid-request
			case p.MasterPID != before.MasterPID || p.Reloads > before.Reloads:
				// Moved (or HAProxy was restarted, which also loads the live files).
				return m.outcome(ctx, p)
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

// outcome says how the load `show proc` p shows ended. From 2.7 on the master keeps the status
// of its last load (`_loadstatus`, what it answers `reload` with); from 3.1 on the reload
// counter moves before the new worker has loaded anything, and only that status tells.
func (m *MasterSocket) outcome(ctx context.Context, p Proc) error {
	if p.AtLeast(2, 7) {
		if out, err := m.Command(ctx, "_loadstatus"); err == nil {
			switch a := ParseAnswer(out); a.Outcome {
			case Loaded:
				return nil
			case Refused:
				return &Failed{Output: a.Logs}
			}
		}
	}
	if p.Failed == 0 {
		return nil
	}
	return &Failed{Output: m.failureOutput(ctx, p)}
}

// showProcRetryRefused is ShowProc that retries a refused connection for a moment (a reload
// someone else started may be under way) before concluding HAProxy is not running.
func (m *MasterSocket) showProcRetryRefused(ctx context.Context) (Proc, error) {
	out, err := m.commandRetryRefused(ctx, "show proc")
	if err != nil {
		return Proc{}, err
	}
	p, err := ParseProc(out)
	if err != nil {
		return p, fmt.Errorf("%s: %w", m.Path, err)
	}
	return p, nil
}

// commandRetryRefused is Command that retries for RefusedGrace a connection that is refused,
// or dropped before the command was answered (a master re-executing for someone else's
// reload does both). An absent socket is not retried: no HAProxy has started on it. Not for
// `reload`, whose dropped connection is an answer (2.6).
func (m *MasterSocket) commandRetryRefused(ctx context.Context, cmd string) (string, error) {
	grace := m.RefusedGrace
	if grace <= 0 {
		grace = DefaultRefusedGrace
	}
	graceCtx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	for {
		out, err := m.Command(ctx, cmd)
		refused := errors.Is(err, ErrNotRunning) && !errors.Is(err, syscall.ENOENT)
		if err == nil || !refused && !(cmd != "reload" && cli.Dropped(err)) {
			return out, err
		}
		select {
		case <-graceCtx.Done():
			return out, err
		case <-time.After(m.pollInterval()):
		}
	}
}

// failureOutput gathers what can be said about a failed reload when HAProxy did not answer with
// its start-up logs. HAProxy 2.6 keeps the reason on the master's stderr only (its master CLI
// has no `show startup-logs`); newer versions answer `show startup-logs` on the master CLI.
func (m *MasterSocket) failureOutput(ctx context.Context, p Proc) string {
	msg := fmt.Sprintf("reload %d failed (%d failed since the last successful reload); the reason is in HAProxy's log", p.Reloads, p.Failed)
	if logs, err := m.client(attemptTimeout).Command(ctx, "show startup-logs"); err == nil && strings.TrimSpace(logs) != "" && !strings.HasPrefix(logs, "Unknown command") {
		msg = strings.TrimSpace(logs) + "\n" + msg
	}
	return msg + "\n" + strings.TrimSpace(p.Raw)
}
