package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// Client sends one command line (and its payload) to an HAProxy CLI socket and returns the
// answer; *Socket is one.
type Client interface {
	Command(ctx context.Context, cmd string) (string, error)
}

// sessions is a Client that can also send many commands on one connection (*Socket): an
// update then goes through one session rather than a connection per command.
type sessions interface {
	Session(ctx context.Context) (*cli.Session, error)
}

// Options configure an Updater.
type Options struct {
	Client Client
	// Prefix is put before every command: "@1 " through the master socket, "" on a stats
	// socket.
	Prefix string
	// Master, with Client a stats socket, is the master CLI socket the commands go through
	// (with "@1 ") while the stats socket cannot be used (nothing listens there, or its mode
	// refuses the sidecar): a configuration that declares none at that path keeps its
	// runtime updates instead of reloading for each change. A
	// stats socket spares each command the master's relay to the worker (two more hops
	// between processes, each a wait for the CPU on a busy node: docs/performance.md).
	Master Client
	// SSLDir is the absolute certificate directory the configuration names (the `ssldir` of the
	// templates): certificate files are found there.
	SSLDir string
	// MapsDir is the absolute directory the configuration names map files in (the `mapsdir`
	// of the templates): HAProxy names a map by its file's path as written there.
	MapsDir string
	Logger  *slog.Logger
}

// Updater changes a running HAProxy through its runtime API. It keeps no state: what HAProxy
// runs is a Model its caller keeps and passes in, and each change returns the Model after it.
// It is safe for concurrent use.
type Updater struct {
	opts Options
	log  *slog.Logger
	// session, when set (on the copy one update uses: inSession), carries the commands, and
	// the commands batch would join with ";" are sent apart on it, together.
	session *cli.Session
	// fellBack: this copy goes through opts.Master, the stats socket not usable
	// (throughMaster). viaMaster: the last update did (said once per change of route).
	fellBack  bool
	viaMaster *atomic.Bool
}

// New returns an Updater.
func New(opts Options) *Updater {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Updater{opts: opts, log: opts.Logger, viaMaster: &atomic.Bool{}}
}

// throughMaster is u sending its commands through the master socket (opts.Master, "@1 "),
// when err says the stats socket cannot be used: nothing listens there, or its mode refuses
// the sidecar (HAProxy running as another user); ok is false otherwise (no master to fall
// back to, or another error).
func (u *Updater) throughMaster(err error) (mu *Updater, ok bool) {
	if u.opts.Master == nil || !errors.Is(err, cli.ErrNotRunning) && !errors.Is(err, syscall.EACCES) {
		return u, false
	}
	m := *u
	m.opts.Client, m.opts.Prefix, m.opts.Master, m.session, m.fellBack = u.opts.Master, "@1 ", nil, nil, true
	return &m, true
}

// routed notes which socket an update went through once the socket answered, and says so
// when that changed: a configuration with no stats socket at the path the sidecar was given
// (a template that does not declare it) is worth knowing of, not worth a reload.
func (u *Updater) routed() {
	if u.viaMaster == nil || u.opts.Master == nil && !u.fellBack || u.viaMaster.Swap(u.fellBack) == u.fellBack {
		return
	}
	if u.fellBack {
		u.log.Info("runtime API: the stats socket cannot be used (nothing listens there, or its mode refuses the sidecar); its commands go through the master socket (declare `stats socket PATH level admin` in the configuration, readable by the sidecar, to spare them the master's relay)")
	} else {
		u.log.Info("runtime API: its commands go through the stats socket")
	}
}

// Plan compares a new rendering (haproxy.cfg, the certificate files by name without ".pem",
// the map files by name) with what HAProxy runs (m; nil: not known, and the plan asks for a
// reload).
func (u *Updater) Plan(m *Model, config []byte, certs, maps map[string][]byte) *Plan {
	return plan(m, config, certs, maps, dirs{ssl: u.opts.SSLDir, maps: u.opts.MapsDir})
}

// errBusy is a del server refused because the server still has connections.
var errBusy = errors.New("server still has connections")

// Apply sends the plan's commands: backends added (with their servers, then published), then
// servers added and changed, then map files replaced, then backends unpublished and servers
// removed, then backends deleted, then certificates. current is what HAProxy runs now: the plan must have
// been made against it. On success it returns what HAProxy runs then: the plan's target (the
// whole new rendering when Reload() is ""). On error what HAProxy runs is not known until the
// next reload, which the caller makes.
func (u *Updater) Apply(ctx context.Context, p *Plan, current *Model) (*Model, error) {
	if p.target == nil || p.base != current {
		return nil, errors.New("runtime update: the plan was not made against what HAProxy runs now")
	}
	target := p.target.clone()
	u, done := u.inSession(ctx)
	defer done()
	pid, v, err := u.sameWorker(ctx, current.pid)
	if err != nil {
		return nil, err
	}
	target.pid, target.version = pid, v
	if err := u.apply(ctx, p, target); err != nil {
		return nil, err
	}
	return target, nil
}

// sessionOpen bounds the opening of a session: HAProxy answers "prompt" at once (the master
// itself, even while a worker starts); a socket that does not is used one connection per
// command, without the update waiting for it long.
const sessionOpen = 2 * time.Second

// inSession returns an Updater that sends its commands through one CLI session, and what
// closes it; u itself when the client has no sessions or the session cannot be opened (the
// commands then go one connection each, as they did before sessions: nothing is lost).
func (u *Updater) inSession(ctx context.Context) (*Updater, func()) {
	sc, ok := u.opts.Client.(sessions)
	if !ok || u.session != nil {
		return u, func() {}
	}
	octx, cancel := context.WithTimeout(ctx, sessionOpen)
	s, err := sc.Session(octx)
	cancel()
	if err != nil {
		if mu, ok := u.throughMaster(err); ok {
			return mu.inSession(ctx)
		}
		u.log.Debug("runtime API: no CLI session, one connection per command", "error", err)
		return u, func() {}
	}
	u.routed()
	su := *u
	su.session = s
	return &su, func() { s.Close() }
}

// client is what carries the commands: the session, else the client.
func (u *Updater) client() Client {
	if u.session != nil {
		return u.session
	}
	return u.opts.Client
}

// together sends command lines that HAProxy runs one after the other whatever each answers,
// and returns their answers one after the other: in one line separated by ";", or on the
// session, sent together (interactive mode answers each of a line's commands apart through
// the master socket, all at once on a 3.2 stats socket: a session sends them apart).
func (u *Updater) together(ctx context.Context, lines []string) (string, error) {
	if u.session == nil {
		return u.opts.Client.Command(ctx, strings.Join(lines, "; "))
	}
	answers, err := u.session.Commands(ctx, lines)
	return strings.Join(answers, ""), err
}

// apply sends the plan's commands and records in target the servers HAProxy keeps busy.
func (u *Updater) apply(ctx context.Context, p *Plan, target *Model) error {
	// Servers added and changed, then the removals: the commands that put them in maintenance,
	// then the deletes, each group sent in as few exchanges as the batch size allows.
	var changes, before, dels []command
	var removals, swaps, drops, others []step
	for _, st := range p.steps {
		switch {
		case st.swap != nil:
			swaps = append(swaps, st)
		case st.drop:
			drops = append(drops, st)
		case st.unpublish:
			before = append(before, st.cmds...) // before its servers go to maintenance
		case st.create:
			changes = append(changes, st.cmds...)
		case st.remove:
			before = append(before, st.cmds[:len(st.cmds)-1]...)
			dels = append(dels, st.cmds[len(st.cmds)-1])
			removals = append(removals, st)
		case st.backend != "":
			changes = append(changes, st.cmds...)
			target.forget(st.backend, st.server) // a zombie brought back is a server again
		default:
			others = append(others, st)
		}
	}
	if err := u.batch(ctx, changes, nil); err != nil {
		return fmt.Errorf("runtime update: %w", err)
	}
	// Maps after the servers they may send traffic to were added, before the servers they
	// may have sent traffic to are removed.
	if err := u.swapMaps(ctx, swaps); err != nil {
		return fmt.Errorf("runtime update: %w", err)
	}
	if err := u.batch(ctx, before, nil); err != nil {
		return fmt.Errorf("runtime update: %w", err)
	}
	outcomes := make([]error, len(dels))
	if err := u.batch(ctx, dels, outcomes); err != nil {
		return fmt.Errorf("runtime update: %w", err)
	}
	u.retryIdle(ctx, removals, dels, outcomes, drops)
	var busy []step
	for i, st := range removals {
		switch err := outcomes[i]; {
		case err == nil:
			target.forget(st.backend, st.server)
		case st.bestEffort:
			u.log.Debug("runtime update: still cannot delete a removed server", "server", serverRef(st.backend, st.server), "error", err)
		case errors.Is(err, errBusy):
			busy = append(busy, st)
		default:
			return fmt.Errorf("runtime update: %s: %w", st.what, err)
		}
	}
	u.keepZombies(busy, target)
	// Backends removed: deleted now that their servers are, or kept (unpublished) until the
	// servers that still have connections are deleted too.
	for _, st := range drops {
		if len(target.zombies[st.backend]) > 0 {
			target.gone[st.backend] = true
			u.log.Debug("removed backend kept until its servers' connections end", "backend", st.backend)
			continue
		}
		if err := u.run(ctx, st.cmds); err != nil {
			return fmt.Errorf("runtime update: %s: %w", st.what, err)
		}
		delete(target.gone, st.backend)
	}
	// Certificates: commands with payloads or answers of several lines, one at a time.
	for _, st := range others {
		if err := u.run(ctx, st.cmds); err != nil {
			return fmt.Errorf("runtime update: %s: %w", st.what, err)
		}
	}
	return nil
}

// A removed backend's server HAProxy would not delete is asked again idleRetries times, after
// idleRetry, then twice as long each time: HAProxy closes the idle connections it keeps to a
// server put in maintenance a moment later, on its own threads (measured on 3.4.7: 3 deletes
// in 40 right after traffic found one, each gone within 2 ms). A request still in flight keeps
// its server longer: it is left to a later update or Tidy, and its backend with it.
const (
	idleRetry   = 5 * time.Millisecond
	idleRetries = 3
)

// retryIdle deletes again the servers of the backends drops removes that were still busy
// (outcomes[i] is the outcome of dels[i], the delete of removals[i]; updated).
func (u *Updater) retryIdle(ctx context.Context, removals []step, dels []command, outcomes []error, drops []step) {
	dropped := map[string]bool{}
	for _, st := range drops {
		dropped[st.backend] = true
	}
	pause := idleRetry
	for try := 0; try < idleRetries && len(dropped) > 0; try++ {
		var again []int
		for i, st := range removals {
			if dropped[st.backend] && errors.Is(outcomes[i], errBusy) {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause *= 2
		cmds, res := make([]command, len(again)), make([]error, len(again))
		for j, i := range again {
			cmds[j] = dels[i]
		}
		if err := u.batch(ctx, cmds, res); err != nil {
			return
		}
		for j, i := range again {
			outcomes[i] = res[j]
		}
	}
}

// sameWorker checks that the runtime API still talks to the worker the previous changes were
// made in (was; 0: none since the last reload), and returns the worker's pid and HAProxy's
// version. A worker HAProxy started without the sidecar (a reload or a restart by someone
// else) loaded the files on disk, which may not hold every change made at runtime yet.
func (u *Updater) sameWorker(ctx context.Context, was int) (int, Version, error) {
	pid, v, err := u.showInfo(ctx)
	if err != nil {
		return 0, Version{}, fmt.Errorf("runtime update: %w", err)
	}
	if was != 0 && pid != was {
		return 0, Version{}, fmt.Errorf("runtime update: HAProxy's worker changed (pid %d, was %d): it was reloaded or restarted without the sidecar", pid, was)
	}
	return pid, v, nil
}

// showInfo asks the worker its pid and HAProxy's version.
func (u *Updater) showInfo(ctx context.Context) (int, Version, error) {
	answer, err := u.client().Command(ctx, u.opts.Prefix+"show info")
	if err != nil {
		return 0, Version{}, fmt.Errorf("show info: %w", err)
	}
	pid, v := 0, Version{}
	for _, l := range strings.Split(answer, "\n") {
		if w, ok := strings.CutPrefix(l, "Pid: "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(w))
		}
		if w, ok := strings.CutPrefix(l, "Version: "); ok {
			v = parseVersion(strings.TrimSpace(w))
		}
	}
	if pid == 0 {
		return 0, Version{}, fmt.Errorf("show info: no Pid in %q", firstLine(answer))
	}
	return pid, v, nil
}

// Learn returns m (what HAProxy runs once it has loaded a configuration) with the version of
// the HAProxy that runs it, which says what it can change at runtime; m as it is when HAProxy
// does not answer (its changes then reload until a runtime update learns it).
func (u *Updater) Learn(ctx context.Context, m *Model) *Model {
	if m == nil {
		return nil
	}
	_, v, err := u.showInfo(ctx)
	if mu, ok := u.throughMaster(err); ok {
		_, v, err = mu.showInfo(ctx)
	}
	if err != nil {
		u.log.Debug("runtime API: cannot tell HAProxy's version", "error", err)
		return m
	}
	next := m.clone()
	next.version = v
	return next
}

// maxBatch bounds the length of one command line of several commands: HAProxy reads a command
// line into one buffer (tune.bufsize, 16 kB by default).
const maxBatch = 4096

// batch sends commands that answer nothing or one line, several per exchange, separated by
// ";". The answer must be exactly the expected lines (one per oneLine command, in order):
// anything else (a silent command that complained, a refusal) is an error. With outcomes set,
// every command must be oneLine, and outcomes[i] receives the check of the i-th answer instead.
func (u *Updater) batch(ctx context.Context, cmds []command, outcomes []error) error {
	for start := 0; start < len(cmds); {
		end, size := start, 0
		for end < len(cmds) && (end == start || size+len(u.opts.Prefix)+len(cmds[end].line)+2 <= maxBatch) {
			size += len(u.opts.Prefix) + len(cmds[end].line) + 2
			end++
		}
		chunk := cmds[start:end]
		parts := make([]string, len(chunk))
		for i, c := range chunk {
			if !c.silent && !c.oneLine || c.payload != "" {
				return fmt.Errorf("%q cannot be sent with others", c.line)
			}
			if err := oneLine(c.line); err != nil {
				return err
			}
			parts[i] = u.opts.Prefix + c.line
		}
		answer, err := u.together(ctx, parts)
		if err != nil {
			return fmt.Errorf("%q: %w", chunk[0].line, err)
		}
		lines := answerLines(answer)
		if outcomes != nil {
			if len(lines) != len(chunk) {
				return fmt.Errorf("%d answers to %d commands (%q...): %q", len(lines), len(chunk), chunk[0].line, firstLine(answer))
			}
			for i, c := range chunk {
				outcomes[start+i] = c.expect(lines[i])
			}
			start = end
			continue
		}
		j := 0
		for _, c := range chunk {
			if c.silent {
				continue
			}
			if j >= len(lines) {
				return fmt.Errorf("%q: no answer", c.line)
			}
			if err := c.expect(lines[j]); err != nil {
				return fmt.Errorf("%q: %w", c.line, err)
			}
			j++
		}
		if j < len(lines) {
			return fmt.Errorf("after %q...: unexpected answer %q", chunk[0].line, lines[j])
		}
		start = end
	}
	return nil
}

// answerLines are the non-empty lines of an answer.
func answerLines(answer string) []string {
	var out []string
	for _, l := range strings.Split(answer, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// keepZombies records removed servers HAProxy would not delete yet because they still have
// connections (a client's keep-alive session holds a connection to the server until that client
// goes): they stay in maintenance, with no new traffic, and are deleted by a later update or
// by Tidy, or vanish at the next reload.
func (u *Updater) keepZombies(busy []step, target *Model) {
	for _, st := range busy {
		u.log.Debug("removed server still has connections: left in maintenance, deleted later",
			"server", serverRef(st.backend, st.server))
		if target.zombies[st.backend] == nil {
			target.zombies[st.backend] = map[string]*cfgparse.Server{}
		}
		target.zombies[st.backend][st.server] = st.removed
	}
}

// Tidy deletes again the removed servers that still had connections from what HAProxy runs
// (m), and the removed backends they kept; it returns what HAProxy runs then and how many
// servers and backends are left. Errors leave them for the next try.
func (u *Updater) Tidy(ctx context.Context, m *Model) (*Model, int) {
	if m == nil || len(m.zombies) == 0 && len(m.gone) == 0 {
		return m, 0
	}
	u, done := u.inSession(ctx) // through the master socket when the stats socket is not there
	defer done()
	var dels []command
	var refs [][2]string
	for _, be := range sortedKeys(m.zombies) {
		for _, name := range sortedKeys(m.zombies[be]) {
			dels = append(dels, removeServer(be, m.zombies[be][name], true).cmds...)
			refs = append(refs, [2]string{be, name})
		}
	}
	outcomes := make([]error, len(dels))
	if err := u.batch(ctx, dels, outcomes); err != nil {
		u.log.Debug("runtime update: deleting removed servers again", "error", err)
		return m, len(refs) + len(m.gone)
	}
	next := m.clone()
	left := 0
	for i, ref := range refs {
		if outcomes[i] == nil {
			next.forget(ref[0], ref[1])
		} else {
			left++
		}
	}
	for _, be := range sortedKeys(next.gone) {
		if len(next.zombies[be]) > 0 {
			left++
			continue
		}
		if err := u.run(ctx, dropBackend(be).cmds); err != nil {
			u.log.Debug("runtime update: deleting a removed backend", "backend", be, "error", err)
			left++
			continue
		}
		delete(next.gone, be)
	}
	return next, left
}

func (s *Model) forget(backend, server string) {
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
		if err := oneLine(c.line); err != nil {
			return err
		}
		if err := oneLine(c.abort); err != nil {
			return err
		}
		if c.payload != "" {
			if err := checkPayload(c.payload); err != nil {
				return fmt.Errorf("%q: %w", c.line, err)
			}
		}
		line := u.opts.Prefix + c.line
		if c.payload != "" {
			line += "\n" + c.payload + "\n"
		}
		answer, err := u.client().Command(ctx, line)
		if err == nil {
			if !c.raw {
				answer = strings.TrimSpace(answer)
			}
			err = c.expect(answer)
		}
		if err != nil {
			if c.abort != "" {
				_, _ = u.opts.Client.Command(ctx, u.opts.Prefix+c.abort) // the session may be what failed
			}
			return fmt.Errorf("%q: %w", c.line, err)
		}
	}
	return nil
}

// oneLine refuses a command line with a control character: a line break would end the command
// and start another one. Plans never hold one (checkSteps); this guards what reaches the socket
// whatever the plan.
func oneLine(line string) error {
	for i := 0; i < len(line); i++ {
		if c := line[i]; c < ' ' || c == 0x7f {
			return fmt.Errorf("command %s has a control character: not sent", quote(line))
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

// runTogether sends commands as run does, but on a session all together, not each once the
// one before answered: HAProxy runs every one of them whatever the others answer, so they
// must be commands whose failure leaves nothing to undo but what the caller undoes anyway
// (the payloads of a map version that is then never committed). Without a session, run.
func (u *Updater) runTogether(ctx context.Context, cmds []command) error {
	if u.session == nil || len(cmds) < 2 {
		return u.run(ctx, cmds)
	}
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		if c.abort != "" {
			return fmt.Errorf("%q cannot be sent with others", c.line)
		}
		if err := oneLine(c.line); err != nil {
			return err
		}
		lines[i] = u.opts.Prefix + c.line
		if c.payload != "" {
			if err := checkPayload(c.payload); err != nil {
				return fmt.Errorf("%q: %w", c.line, err)
			}
			lines[i] += "\n" + c.payload + "\n"
		}
	}
	answers, err := u.session.Commands(ctx, lines)
	if err != nil {
		return fmt.Errorf("%q: %w", cmds[0].line, err)
	}
	for i, c := range cmds {
		answer := answers[i]
		if !c.raw {
			answer = strings.TrimSpace(answer)
		}
		if err := c.expect(answer); err != nil {
			return fmt.Errorf("%q (%d of %d): %w", c.line, i+1, len(cmds), err)
		}
	}
	return nil
}
