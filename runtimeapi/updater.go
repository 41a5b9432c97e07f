package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/haproxycfg"
)

// Client sends one command line (and its payload) to an HAProxy CLI socket and returns the
// answer; *Socket is one.
type Client interface {
	Command(ctx context.Context, cmd string) (string, error)
}

// Options configure an Updater.
type Options struct {
	Client Client
	// Prefix is put before every command: "@1 " through the master socket, "" on a stats
	// socket.
	Prefix string
	// SSLDir is the absolute certificate directory the configuration names (the `ssldir` of the
	// templates): certificate files are found there.
	SSLDir string
	// DeleteWait bounds how long a removed server that still has connections is retried before
	// it is left in maintenance, to be deleted at a later update (default 1s).
	DeleteWait time.Duration
	Logger     *slog.Logger
}

// Updater knows what a running HAProxy runs and changes it through the runtime API. Plan,
// Apply, Reloaded and Forget are meant to be called by one pipeline in turn; they are safe for
// concurrent use.
type Updater struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	live *state // nil: not known
	prev *state // what HAProxy ran before the last Apply (for Undo); nil: nothing to undo
}

// New returns an Updater that knows nothing of what HAProxy runs yet: its first plan asks for a
// reload.
func New(opts Options) *Updater {
	if opts.DeleteWait <= 0 {
		opts.DeleteWait = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Updater{opts: opts, log: opts.Logger}
}

// Plan compares a new rendering (haproxy.cfg and the certificate files by name, without
// ".pem") with what HAProxy runs.
func (u *Updater) Plan(config []byte, certs map[string][]byte) *Plan {
	u.mu.Lock()
	live := u.live
	u.mu.Unlock()
	return plan(live, config, certs, u.opts.SSLDir)
}

// Reloaded records that HAProxy (re)loaded the rendering p was made for: it runs exactly that,
// with nothing added at runtime.
func (u *Updater) Reloaded(p *Plan) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.live, u.prev = nil, nil
	if p != nil && p.full != nil {
		u.live = &state{cfg: p.full.cfg, certs: p.full.certs}
	}
}

// Forget records that what HAProxy runs is not known (a reload whose outcome is unknown): the
// next plan asks for a reload.
func (u *Updater) Forget() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.live, u.prev = nil, nil
}

// errBusy is a del server refused because the server still has connections.
var errBusy = errors.New("server still has connections")

// Apply sends the plan's commands: servers added first, then changed, then removed, then
// certificates. On success HAProxy runs the plan's target (the whole new rendering when
// Reload() is ""). On error what HAProxy runs is not known until the next reload, which the
// caller makes.
func (u *Updater) Apply(ctx context.Context, p *Plan) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p.target == nil || p.base != u.live {
		return errors.New("runtime update: the plan was not made against what HAProxy runs now")
	}
	return u.apply(ctx, p)
}

// Undo takes the last Apply back through the runtime API: HAProxy runs again what it ran
// before (for a change that went live at runtime but then failed validation). On error what
// HAProxy runs is not known; the caller reloads.
func (u *Updater) Undo(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.live == nil || u.prev == nil {
		u.live, u.prev = nil, nil
		return errors.New("runtime update: nothing to take back")
	}
	prev := &state{cfg: u.prev.cfg, certs: u.prev.certs}
	p := planTo(u.live, prev, u.opts.SSLDir)
	if p.reason != "" {
		u.live, u.prev = nil, nil
		return fmt.Errorf("runtime update: cannot take it back: %s", p.reason)
	}
	if err := u.apply(ctx, p); err != nil {
		return err
	}
	u.prev = nil
	return nil
}

func (u *Updater) apply(ctx context.Context, p *Plan) error {
	base := u.live
	u.live, u.prev = nil, nil
	target := p.target.clone()
	var busy []step
	for _, st := range p.steps {
		err := u.run(ctx, st.cmds)
		switch {
		case err == nil:
			if st.remove {
				target.forget(st.backend, st.server)
			}
		case st.bestEffort:
			u.log.Debug("runtime update: still cannot delete a removed server", "server", serverRef(st.backend, st.server), "error", err)
		default:
			if !(st.remove && errors.Is(err, errBusy)) {
				return fmt.Errorf("runtime update: %s: %w", st.what, err)
			}
			busy = append(busy, st)
		}
		// A zombie revived by the new rendering is a server again.
		if !st.remove {
			target.forget(st.backend, st.server)
		}
	}
	if err := u.deleteBusy(ctx, busy, target); err != nil {
		return err
	}
	u.live, u.prev = target, base
	return nil
}

// deleteBusy retries deleting servers that still had connections, for up to DeleteWait; those
// left stay in maintenance (no traffic) and are deleted at a later update, or vanish at the
// next reload.
func (u *Updater) deleteBusy(ctx context.Context, busy []step, target *state) error {
	deadline := time.Now().Add(u.opts.DeleteWait)
	for wait := 20 * time.Millisecond; len(busy) > 0 && time.Now().Before(deadline); wait = min(2*wait, 200*time.Millisecond) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("runtime update: %w", ctx.Err())
		case <-time.After(wait):
		}
		var still []step
		for _, st := range busy {
			del := st.cmds[len(st.cmds)-1:]
			switch err := u.run(ctx, del); {
			case err == nil:
			case errors.Is(err, errBusy):
				still = append(still, st)
			default:
				return fmt.Errorf("runtime update: %s: %w", st.what, err)
			}
		}
		busy = still
	}
	for _, st := range busy {
		u.log.Info("removed server still has connections: left in maintenance, deleted at a later update",
			"server", serverRef(st.backend, st.server))
		if target.zombies[st.backend] == nil {
			target.zombies[st.backend] = map[string]*haproxycfg.Server{}
		}
		target.zombies[st.backend][st.server] = st.removed
	}
	return nil
}

func (s *state) forget(backend, server string) {
	if z := s.zombies[backend]; z != nil {
		delete(z, server)
		if len(z) == 0 {
			delete(s.zombies, backend)
		}
	}
}

// run sends commands in order and checks each answer.
func (u *Updater) run(ctx context.Context, cmds []command) error {
	for _, c := range cmds {
		line := u.opts.Prefix + c.line
		if c.payload != "" {
			line += "\n" + c.payload + "\n"
		}
		answer, err := u.opts.Client.Command(ctx, line)
		if err == nil {
			err = c.expect(strings.TrimSpace(answer))
		}
		if err != nil {
			if c.abort != "" {
				_, _ = u.opts.Client.Command(ctx, u.opts.Prefix+c.abort)
			}
			return fmt.Errorf("%q: %w", c.line, err)
		}
	}
	return nil
}

// empty: commands that answer nothing on success.
func empty(answer string) error {
	if answer != "" {
		return errors.New(firstLine(answer))
	}
	return nil
}

func contains(want ...string) func(string) error {
	return func(answer string) error {
		for _, w := range want {
			if strings.Contains(answer, w) {
				return nil
			}
		}
		return fmt.Errorf("unexpected answer %q", firstLine(answer))
	}
}

func prefix(want ...string) func(string) error {
	return func(answer string) error {
		for _, w := range want {
			if strings.HasPrefix(answer, w) {
				return nil
			}
		}
		return fmt.Errorf("unexpected answer %q", firstLine(answer))
	}
}

func deleted(answer string) error {
	switch {
	case strings.HasPrefix(answer, "Server deleted"):
		return nil
	case strings.Contains(answer, "still has connections"):
		return errBusy
	}
	return fmt.Errorf("unexpected answer %q", firstLine(answer))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
