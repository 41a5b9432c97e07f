// Package runtimeapi applies configuration changes to a running HAProxy through its runtime API
// (the CLI of a stats socket, or of the master socket with "@1 "), so that most changes need no
// reload: servers of existing backends added, removed, re-addressed, re-weighted, enabled or
// disabled, certificate files replaced, added to or removed from a certificate directory, the
// contents of map files replaced (maps.go), and, from HAProxy 3.4 on, whole backends added and
// removed (backends.go).
//
// The commands are derived from the rendered configuration only: a Model is what HAProxy runs
// (the configuration it last loaded plus the changes made at runtime since), which the caller
// keeps with the rest of what it knows of HAProxy; an Updater compares it with a new
// rendering, section by section and server by server (package cfgparse). When
// the only differences are ones the runtime API can make exactly as a reload would, the Plan
// lists the commands; anything else gives the reason a reload is needed. The caller still
// writes the new files, so that the next reload loads the same state.
package runtimeapi

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// Kinds of runtime updates: the values of the kind label of
// haproxy_sidecar_runtime_updates_total.
const (
	KindServerAdded    = "server_added"
	KindServerRemoved  = "server_removed"
	KindServerUpdated  = "server_updated"
	KindCertUpdated    = "certificate_updated"
	KindCertAdded      = "certificate_added"
	KindCertRemoved    = "certificate_removed"
	KindMapUpdated     = "map_updated"
	KindBackendAdded   = "backend_added"
	KindBackendRemoved = "backend_removed"
)

// Kinds lists every kind.
var Kinds = []string{KindServerAdded, KindServerRemoved, KindServerUpdated, KindCertUpdated, KindCertAdded, KindCertRemoved, KindMapUpdated, KindBackendAdded, KindBackendRemoved}

// dynamicKeywords are the server keywords `add server` accepts on HAProxy 2.6
// (management.txt, "add server"). Servers added at runtime do not get default-server settings:
// the Updater passes the inherited ones explicitly, so they must be in this list too.
var dynamicKeywords = map[string]bool{
	"agent-addr": true, "agent-check": true, "agent-inter": true, "agent-port": true,
	"agent-send": true, "allow-0rtt": true, "alpn": true, "addr": true, "backup": true,
	"ca-file": true, "check": true, "check-alpn": true, "check-proto": true,
	"check-send-proxy": true, "check-sni": true, "check-ssl": true, "check-via-socks4": true,
	"ciphers": true, "ciphersuites": true, "crl-file": true, "crt": true, "downinter": true,
	"error-limit": true, "fall": true, "fastinter": true, "force-sslv3": true,
	"force-tlsv10": true, "force-tlsv11": true, "force-tlsv12": true, "force-tlsv13": true,
	"id": true, "inter": true, "maxconn": true, "maxqueue": true, "minconn": true,
	"no-ssl-reuse": true, "no-sslv3": true, "no-tlsv10": true, "no-tlsv11": true,
	"no-tlsv12": true, "no-tlsv13": true, "no-tls-tickets": true, "npn": true, "observe": true,
	"on-error": true, "on-marked-down": true, "on-marked-up": true, "pool-low-conn": true,
	"pool-max-conn": true, "pool-purge-delay": true, "port": true, "proto": true,
	"proxy-v2-options": true, "rise": true, "send-proxy": true, "send-proxy-v2": true,
	"send-proxy-v2-ssl": true, "send-proxy-v2-ssl-cn": true, "slowstart": true, "sni": true,
	"source": true, "ssl": true, "ssl-max-ver": true, "ssl-min-ver": true, "tfo": true,
	"tls-tickets": true, "track": true, "usesrc": true, "verify": true, "verifyhost": true,
	"ws": true,
	// weight, disabled and enabled are supported too; the Updater sets them itself.
}

// Model is what HAProxy runs, as the runtime API sees it: a configuration, the certificate
// files, the map files, the servers removed at runtime that HAProxy still holds in maintenance
// because they had connections when deleted (zombies, deleted again at the next update), the
// backends removed at runtime that HAProxy still holds for such servers (gone), the worker the
// runtime changes were made in and HAProxy's version. A Model is never changed once made:
// every change gives a new one.
type Model struct {
	cfg   *cfgparse.Config
	certs map[string][]byte
	maps  map[string][]byte // map file name -> content
	// keys count the keys of some of the map files (keyindex.go), by name: made by the plan
	// that made the Model, never changed afterwards; a file without one is read when needed.
	keys    map[string]*keyIndex
	zombies map[string]map[string]*cfgparse.Server // backend -> server name -> server
	// gone are backends removed at runtime, unpublished, that HAProxy keeps until their
	// zombies are deleted (then they are deleted too).
	gone map[string]bool
	// pid is the worker the runtime changes were made in (0: not asked yet since the last
	// reload): another worker means HAProxy was reloaded or restarted behind the sidecar's back.
	pid int
	// version is the version of HAProxy (zero: not known), which says what it can change at
	// runtime: backends from 3.4 on.
	version Version
}

func (s *Model) clone() *Model {
	c := &Model{cfg: s.cfg, certs: s.certs, maps: s.maps, keys: s.keys, pid: s.pid, version: s.version,
		zombies: map[string]map[string]*cfgparse.Server{}, gone: maps.Clone(s.gone)}
	for be, z := range s.zombies {
		c.zombies[be] = maps.Clone(z)
	}
	if c.gone == nil {
		c.gone = map[string]bool{}
	}
	return c
}

// Version is the version of the HAProxy that runs m, as far as the runtime API knows it.
func (s *Model) Version() Version {
	if s == nil {
		return Version{}
	}
	return s.version
}

// command is one runtime API command (without the "@1 " prefix) and how to tell its answer is
// a success.
type command struct {
	line    string
	payload string // sent after the line, ended by an empty line; "" for none
	expect  func(answer string) error
	raw     bool   // expect is given the answer as it came, not trimmed
	abort   string // best-effort command sent when this one fails ("abort ssl cert ...")
	// silent commands answer nothing on success, oneLine ones one line: both can be sent
	// several on one line, separated by ";" (see Updater.batch).
	silent, oneLine bool
}

// step is the commands for one change (one server, one certificate file).
type step struct {
	kind string // "" for housekeeping that counts as no change
	what string
	cmds []command
	// remove marks a server removal (its last command is the del server): a server that still
	// has connections stays as a zombie in maintenance.
	remove          bool
	backend, server string
	removed         *cfgparse.Server
	bestEffort      bool // failure is logged, not an error (deleting a zombie again)
	// swap is the atomic replacement of a map's entries; its commands are made when it is
	// applied (they carry the version HAProxy allocates).
	swap *mapSwap
	// create adds a whole backend (with its servers, then published); unpublish is the first
	// step of a backend's removal, drop its last (del backend, once its servers are deleted).
	create, unpublish, drop bool
}

// Plan is the difference between what HAProxy runs and a new rendering.
type Plan struct {
	reason string
	steps  []step
	base   *Model // what the plan was made against
	target *Model // what HAProxy runs once the steps are applied
	full   *Model // the new rendering (nil when it cannot be read)
}

// Reload returns why the change needs a reload, "" when the runtime API can make all of it.
func (p *Plan) Reload() string { return p.reason }

// Loaded is what HAProxy runs once it has (re)loaded the plan's rendering: exactly that, with
// nothing added at runtime (nil when the rendering cannot be read).
func (p *Plan) Loaded() *Model {
	if p == nil || p.full == nil {
		return nil
	}
	return &Model{cfg: p.full.cfg, certs: p.full.certs, maps: p.full.maps, keys: p.full.keys}
}

// Changes is the number of changes the runtime API will make (servers, certificate files, map
// files, backends).
// With a reload reason, these are the changes that could still be made at runtime while a
// reload waits.
func (p *Plan) Changes() int {
	n := 0
	for _, s := range p.steps {
		if s.kind != "" {
			n++
		}
	}
	return n
}

// Counts returns the number of changes by kind.
func (p *Plan) Counts() map[string]int {
	c := map[string]int{}
	for _, s := range p.steps {
		if s.kind != "" {
			c[s.kind]++
		}
	}
	return c
}

// Summary describes the changes for a log line: "2 server_added, 1 certificate_updated".
func (p *Plan) Summary() string {
	c := p.Counts()
	var parts []string
	for _, k := range Kinds {
		if c[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[k], k))
		}
	}
	if len(parts) == 0 {
		return "no change HAProxy uses"
	}
	return strings.Join(parts, ", ")
}

// Commands lists the commands the plan sends, one line each (payloads left out), for tests and
// debug logs.
func (p *Plan) Commands() []string {
	var out []string
	for _, s := range p.steps {
		if s.swap != nil {
			out = append(out, s.swap.lines("<ver>")...)
			continue
		}
		for _, c := range s.cmds {
			out = append(out, c.line)
		}
	}
	return out
}

// dirs are the directories the configuration names certificate and map files in.
type dirs struct{ ssl, maps string }

// plan compares what HAProxy runs (live, nil if unknown) with a new rendering.
func plan(live *Model, config []byte, certs, maps map[string][]byte, dirs dirs) *Plan {
	// The sections the rendering repeats are the ones of what HAProxy runs, not read again:
	// a change costs what changed. Their strings point into the text live was read from (a
	// rendering's Config, or a copy of the section made by ParseAfter): kept alive by them
	// (a Go string keeps its whole array), and never changed, since a rendering (the
	// render.Bundle's Config the callers pass) is never changed once made.
	var prev *cfgparse.Config
	if live != nil {
		prev = live.cfg
	}
	cfg, err := cfgparse.ParseAfter(prev, config)
	if err != nil {
		return &Plan{base: live, reason: fmt.Sprintf("the rendered configuration cannot be compared: %v", err)}
	}
	return planTo(live, &Model{cfg: cfg, certs: certs, maps: maps}, dirs)
}

// planTo compares what HAProxy runs with the state next.
func planTo(live, next *Model, dirs dirs) *Plan {
	p := &Plan{base: live, full: next}
	cfg, certs := next.cfg, next.certs
	if live == nil {
		p.reason = "what HAProxy runs is not known (first configuration, or after an update that failed)"
		next.keys = indexKeys(next.maps) // for the changes after it: see keyindex.go
		return p
	}
	d := &differ{old: live, new: p.full, sslDir: dirs.ssl, mapsDir: dirs.maps}
	d.sections()
	// The target is what HAProxy runs after the steps: the new rendering when the steps cover
	// everything; otherwise the old configuration with the servers, certificates and maps the
	// steps change.
	p.target = live.clone()
	if d.reason == "" {
		p.target.cfg = cfg
		p.target.certs = certs
		p.target.maps, p.target.keys = next.maps, next.keys
	} else {
		p.target.cfg = d.patched()
		if d.certsDone {
			p.target.certs = certs
		}
		if d.mapsDone {
			p.target.maps, p.target.keys = next.maps, next.keys
		}
	}
	p.reason = d.reason
	if d.reason == "" {
		// Backends only with the whole change: what HAProxy runs while a reload waits is the
		// old configuration with servers, certificates and maps changed (patched).
		p.steps = append(p.steps, d.backendAdds...)
	}
	p.steps = append(append(append(append(p.steps, d.adds...), d.updates...), d.removes...), d.certSteps...)
	if d.reason == "" {
		p.steps = append(p.steps, d.backendRemoves...)
	}
	p.steps = append(p.steps, d.mapSteps...)
	if err := checkSteps(p.steps); err != nil {
		// A value the checks of each change let through: send nothing, reload instead.
		p.steps, p.target = nil, live.clone()
		if p.reason == "" {
			p.reason = err.Error()
		}
	}
	return p
}

// checkSteps checks every command line and payload of a plan (values.go).
func checkSteps(steps []step) error {
	for _, st := range steps {
		if st.swap != nil {
			if err := st.swap.check(); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		for _, c := range st.cmds {
			if err := checkLine(c.line); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
			if c.payload != "" {
				if err := checkPayload(c.payload); err != nil {
					return fmt.Errorf("%s: %w", st.what, err)
				}
			}
			if c.abort != "" {
				if err := checkLine(c.abort); err != nil {
					return fmt.Errorf("%s: %w", st.what, err)
				}
			}
		}
	}
	return nil
}

type differ struct {
	old, new        *Model
	sslDir, mapsDir string
	reason          string // the first reason a reload is needed

	adds, updates, removes, certSteps, mapSteps []step
	backendAdds, backendRemoves                 []step
	// done are the backends whose servers the steps bring to the new rendering (for a
	// partial plan).
	done                map[secKey]*cfgparse.Section
	certsDone, mapsDone bool
}

func (d *differ) needReload(format string, args ...any) {
	if d.reason == "" {
		d.reason = fmt.Sprintf(format, args...)
	}
}

func describe(s *cfgparse.Section) string {
	if s.Kind == "" {
		return "the lines before the first section"
	}
	if s.Name == "" {
		return s.Kind + " section"
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// secKey identifies a section in a configuration, as Section.Key does, without allocating.
type secKey struct{ kind, name string }

func keyOf(s *cfgparse.Section) secKey { return secKey{s.Kind, s.Name} }

func (d *differ) sections() {
	o, n := d.old.cfg.Sections, d.new.cfg.Sections
	if sameOrder(o, n) {
		d.sameSections(o, n)
	} else {
		d.changedSections(o, n)
	}
	d.diffCerts()
	d.diffMaps()
}

// sameOrder reports whether two configurations have the same sections in the same order (what
// changedSections finds then is nothing).
func sameOrder(o, n []*cfgparse.Section) bool {
	if len(o) != len(n) {
		return false
	}
	for i := range o {
		if o[i] != n[i] && keyOf(o[i]) != keyOf(n[i]) {
			return false
		}
	}
	return true
}

// sameSections compares the sections of two configurations with the same sections in the same
// order.
func (d *differ) sameSections(o, n []*cfgparse.Section) {
	for i := range o {
		if o[i] != n[i] { // the same section (ParseAfter reused it): not even read
			d.compareLines(o[i], n[i])
		}
	}
	d.servers(o, n)
}

// servers compares the servers of the new configuration's backends with those of the old
// backends of the same name.
func (d *differ) servers(o, n []*cfgparse.Section) {
	// When the sections have the same keys in the same order and those of the old backends
	// are their own, the old backend of a name is the one at the same place: no index of
	// them all is needed.
	var oldProxies map[secKey]*cfgparse.Section
	if !d.old.cfg.UniqueProxies() || !sameOrder(o, n) {
		oldProxies = make(map[secKey]*cfgparse.Section, len(o))
		for _, s := range o {
			if s.HasServers() {
				oldProxies[keyOf(s)] = s
			}
		}
	}
	d.done = map[secKey]*cfgparse.Section{}
	noZombies := len(d.old.zombies) == 0
	for i, ns := range n {
		if oldProxies == nil && o[i] == ns && noZombies {
			// The old backend of its name is itself: the same servers, nothing to patch
			// (below), and no section of its name came before (the names are unique). The
			// sections are not read: at 10,000 backends that cost more than the change.
			continue
		}
		var os *cfgparse.Section
		if oldProxies != nil {
			os = oldProxies[keyOf(ns)]
		} else if o[i].HasServers() {
			os = o[i]
		}
		if os == nil || !ns.HasServers() {
			continue
		}
		if cfgparse.Unchanged(os, ns) && (noZombies || len(d.old.zombies[ns.Name]) == 0) {
			// The same servers: diffServers would find nothing to do. The old section needs
			// no patching either (patched: the same section, moved or not, has its servers'
			// lines in the new rendering there), unless it is another one or another section
			// of the same name comes in (there may be two: the last one's servers are what
			// patched puts in).
			k := keyOf(ns)
			if _, again := d.done[k]; again || os != ns || !d.old.cfg.UniqueProxies() {
				d.done[k] = ns
			}
			continue
		}
		if d.diffServers(os, ns) {
			d.done[keyOf(ns)] = ns
		}
	}
}

// compareLines compares the header and lines of two sections of the same key. A section the
// new configuration reused from the old one (cfgparse.Unchanged) has the same ones.
func (d *differ) compareLines(os, ns *cfgparse.Section) {
	if os == ns || cfgparse.Unchanged(os, ns) {
		return
	}
	if !slices.Equal(os.Header, ns.Header) {
		d.needReload("the header line of %s changed", describe(ns))
	}
	if r := lineChange(os.Lines, ns.Lines); r != "" {
		d.needReload("%s: %s", describe(ns), r)
	}
}

// changedSections compares two configurations whose sections were added, removed or reordered.
func (d *differ) changedSections(o, n []*cfgparse.Section) {
	inOld, inNew, same := presence(o, n)
	// Backends added or removed are the runtime API's from HAProxy 3.4 on (diffBackends);
	// every other section must be the same, in the same order.
	var added, removed []*cfgparse.Section
	if len(o) != len(n) || !same {
		n = slices.DeleteFunc(slices.Clone(n), func(s *cfgparse.Section) bool {
			if !inOld(s) && s.Kind == "backend" {
				added = append(added, s)
				return true
			}
			return false
		})
		o = slices.DeleteFunc(slices.Clone(o), func(s *cfgparse.Section) bool {
			if !inNew(s) && s.Kind == "backend" {
				removed = append(removed, s)
				return true
			}
			return false
		})
		for _, s := range n {
			if !inOld(s) {
				d.needReload("%s is new", describe(s))
			}
		}
		for _, s := range o {
			if !inNew(s) {
				d.needReload("%s was removed", describe(s))
			}
		}
	}
	// First, so that a reload's reason names a backend added or removed before the lines
	// that name it.
	d.diffBackends(added, removed)
	if len(o) != len(n) {
		d.needReload("sections were added or removed")
	}
	for i := 0; i < len(o) && i < len(n); i++ {
		if o[i] != n[i] && keyOf(o[i]) != keyOf(n[i]) {
			d.needReload("sections were reordered")
			break
		}
		if o[i] != n[i] {
			d.compareLines(o[i], n[i])
		}
	}
	// Servers, backend by backend (by name: this also serves a partial plan when sections
	// changed).
	d.servers(o, n)
}

// maxUnpaired bounds the sections presence looks for one by one.
const maxUnpaired = 16

// presence says of a section of n whether o has one of its key (inOld), of a section of o
// whether n has (inNew), and whether both have the same keys. When few sections differ, the
// two lists are walked side by side and only the sections left unpaired are looked for in the
// other one; else every key is indexed.
func presence(o, n []*cfgparse.Section) (inOld, inNew func(*cfgparse.Section) bool, same bool) {
	var lonelyO, lonelyN []*cfgparse.Section
	i, j := 0, 0
	for i < len(o) && j < len(n) && len(lonelyO)+len(lonelyN) <= maxUnpaired {
		switch {
		case o[i] == n[j] || keyOf(o[i]) == keyOf(n[j]):
			i, j = i+1, j+1
		case j+1 < len(n) && keyOf(o[i]) == keyOf(n[j+1]):
			lonelyN, j = append(lonelyN, n[j]), j+1
		case i+1 < len(o) && keyOf(o[i+1]) == keyOf(n[j]):
			lonelyO, i = append(lonelyO, o[i]), i+1
		default:
			lonelyO, lonelyN, i, j = append(lonelyO, o[i]), append(lonelyN, n[j]), i+1, j+1
		}
	}
	if len(lonelyO)+len(lonelyN)+len(o)-i+len(n)-j > maxUnpaired {
		oldKeys, newKeys := keySet(o), keySet(n)
		inOld = func(s *cfgparse.Section) bool { return oldKeys[keyOf(s)] }
		inNew = func(s *cfgparse.Section) bool { return newKeys[keyOf(s)] }
		return inOld, inNew, len(oldKeys) == len(newKeys) && sameKeys(oldKeys, newKeys)
	}
	lonelyO, lonelyN = append(lonelyO, o[i:]...), append(lonelyN, n[j:]...)
	absent := map[*cfgparse.Section]bool{} // the unpaired sections whose key the other list lacks
	for _, s := range lonelyN {
		if !slices.ContainsFunc(o, func(x *cfgparse.Section) bool { return keyOf(x) == keyOf(s) }) {
			absent[s] = true
		}
	}
	for _, s := range lonelyO {
		if !slices.ContainsFunc(n, func(x *cfgparse.Section) bool { return keyOf(x) == keyOf(s) }) {
			absent[s] = true
		}
	}
	has := func(s *cfgparse.Section) bool { return !absent[s] }
	return has, has, len(absent) == 0
}

func keySet(sections []*cfgparse.Section) map[secKey]bool {
	keys := make(map[secKey]bool, len(sections))
	for _, s := range sections {
		keys[keyOf(s)] = true
	}
	return keys
}

// sameKeys reports whether two sets of the same size hold the same keys.
func sameKeys(a, b map[secKey]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// lineChange says how two sections' lines differ ("" if they do not). It names the keyword of
// the first differing line, not the line: lines may hold passwords.
func lineChange(a, b []string) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		switch {
		case i >= len(a):
			return fmt.Sprintf("a %q line was added", keyword(b[i]))
		case i >= len(b):
			return fmt.Sprintf("a %q line was removed", keyword(a[i]))
		case a[i] != b[i]:
			if keyword(a[i]) == keyword(b[i]) {
				return fmt.Sprintf("a %q line changed", keyword(a[i]))
			}
			return fmt.Sprintf("a %q line became a %q line", keyword(a[i]), keyword(b[i]))
		}
	}
	return ""
}

func keyword(line string) string {
	kw, _, _ := strings.Cut(line, " ")
	return kw
}

// patched is the old configuration with the servers of the backends in d.done replaced by
// their new servers.
//
// A section of both (reused by ParseAfter, moved or not) whose servers servers found the same,
// no server left behind, with backends of unique names (servers paired it with itself), is not
// in d.done (it would be 10,000 entries per change at 10,000 backends): it stays as it is, its
// servers at their lines in the new rendering, as those of a section in d.done.
func (d *differ) patched() *cfgparse.Config {
	next := d.new.cfg
	at := make(map[*cfgparse.Section]int, len(next.Sections)) // the last place of each
	for j, s := range next.Sections {
		at[s] = j
	}
	return d.old.cfg.Patched(next, func(i int) int {
		s := d.old.cfg.Sections[i]
		if ns := d.done[keyOf(s)]; ns != nil {
			return at[ns]
		}
		if j, ok := at[s]; ok && s.HasServers() && d.old.cfg.UniqueProxies() && len(d.old.zombies[s.Name]) == 0 {
			return j
		}
		return -1
	})
}

// diffServers adds the steps that bring the servers of backend os to those of ns; it reports
// false (with a reason) when the runtime API cannot do it exactly.
func (d *differ) diffServers(os, ns *cfgparse.Section) bool {
	be := ns.Name
	zombies := d.old.zombies[be]
	same := len(os.Servers) == len(ns.Servers) && len(zombies) == 0
	if same {
		for i := range os.Servers {
			if !sameServer(os.Servers[i], ns.Servers[i]) {
				same = false
				break
			}
		}
	}
	if same {
		return true
	}
	if d.new.cfg.Conditional || d.old.cfg.Conditional {
		d.needReload("servers of %s changed and the configuration has conditional blocks (.if)", describe(ns))
		return false
	}
	if err := checkName("backend", be); err != nil {
		d.needReload("servers of %s changed and its name cannot be written on the runtime API: %v", describe(ns), err)
		return false
	}
	var adds, updates, removes []step
	old := map[string]*cfgparse.Server{}
	for _, s := range os.Servers {
		old[s.Name] = s
	}
	seen := map[string]bool{}
	fail := func(format string, args ...any) bool {
		d.needReload(format, args...)
		return false
	}
	for _, n := range ns.Servers {
		seen[n.Name] = true
		if err := checkName("server", n.Name); err != nil {
			return fail("a server of %s: its name cannot be written on the runtime API: %v", describe(ns), err)
		}
		o, disabled := old[n.Name], false
		if o == nil && zombies[n.Name] != nil {
			o, disabled = zombies[n.Name], true // removed earlier, still there in maintenance
		} else if o != nil {
			disabled = o.Settings().Disabled
		}
		if o == nil {
			st, reason := addServer(be, n)
			if reason != "" {
				return fail("%s", reason)
			}
			adds = append(adds, st)
			continue
		}
		st, reason := updateServer(be, o, n, disabled)
		if reason != "" {
			return fail("%s", reason)
		}
		if len(st.cmds) > 0 {
			updates = append(updates, st)
		}
	}
	for _, o := range os.Servers {
		if !seen[o.Name] {
			removes = append(removes, removeServer(be, o, false))
		}
	}
	for _, name := range sortedKeys(zombies) {
		if !seen[name] {
			removes = append(removes, removeServer(be, zombies[name], true))
		}
	}
	d.adds = append(d.adds, adds...)
	d.updates = append(d.updates, updates...)
	d.removes = append(d.removes, removes...)
	return true
}

func sameServer(a, b *cfgparse.Server) bool {
	return a.Name == b.Name && a.Address == b.Address && slices.Equal(a.Params, b.Params) && slices.Equal(a.Inherited, b.Inherited)
}

func serverRef(be, name string) string { return be + "/" + name }

// addServer is `add server` with the server's inherited and own parameters, then
// `enable health`/`enable agent` for checks and `enable server` unless it is disabled: a
// server added at runtime starts in maintenance, its checks off.
func addServer(be string, n *cfgparse.Server) (step, string) {
	ref := serverRef(be, n.Name)
	st := n.Settings()
	if !st.Known {
		return step{}, fmt.Sprintf("new server %s has a parameter this sidecar does not know", ref)
	}
	if !n.HostPort() {
		return step{}, fmt.Sprintf("new server %s: address %q is not an IP address with a port", ref, n.Address)
	}
	addr, port := n.AddrPort()
	if err := checkPort(port); err != nil {
		return step{}, fmt.Sprintf("new server %s: %v", ref, err)
	}
	words := []string{"add", "server", ref, cfgparse.FormatAddress(addr, port)}
	for _, p := range st.Params {
		if p.Keyword == "init-addr" {
			continue // the address is an IP literal: no resolution happens anyway
		}
		if !dynamicKeywords[p.Keyword] {
			return step{}, fmt.Sprintf("new server %s: %q cannot be given to add server (HAProxy 2.6)", ref, p.Keyword)
		}
		for _, a := range p.Args {
			if !cfgparse.Plain(a) {
				return step{}, fmt.Sprintf("new server %s: the argument of %q cannot be written on the runtime API", ref, p.Keyword)
			}
			if err := checkParam(p.Keyword, a); err != nil {
				return step{}, fmt.Sprintf("new server %s: the argument of %v", ref, err)
			}
		}
		words = append(append(words, p.Keyword), p.Args...)
	}
	if err := checkWeight(st.Weight); err != nil {
		return step{}, fmt.Sprintf("new server %s: %v", ref, err)
	}
	if st.Weight != 1 {
		words = append(words, "weight", strconv.Itoa(st.Weight))
	}
	s := step{kind: KindServerAdded, what: "add server " + ref, backend: be, server: n.Name}
	s.cmds = append(s.cmds, command{line: strings.Join(words, " "), expect: contains("New server registered"), oneLine: true})
	if st.Check {
		s.cmds = append(s.cmds, command{line: "enable health " + ref, expect: empty, silent: true})
	}
	if st.Agent {
		s.cmds = append(s.cmds, command{line: "enable agent " + ref, expect: empty, silent: true})
	}
	if !st.Disabled {
		s.cmds = append(s.cmds, command{line: "enable server " + ref, expect: empty, silent: true})
	}
	return s, ""
}

// updateServer changes address, port, weight and state of a server whose other parameters are
// the same.
//
// A new address or port is set on the running server directly, never through maintenance:
// while a server is in maintenance a backend whose only server it is has none, and answers
// 503. Measured (docs/runtime-api.md), 30 changes of the only server under a load of one new
// connection per request: maint, addr, ready gave 6-10 answers 503 on HAProxy 2.6, 11-23 on 3.0
// and 3.2; addr alone gave none on each, and no new connection reached the old address after
// the command answered. Maintenance bought nothing either: on 2.6 a keep-alive client's session
// keeps its connection to the old address in both cases, until either side closes it (3.x
// drops it in both). What the direct change keeps that it should not is the health of the old
// address: a server checked DOWN stays DOWN until rise checks pass at the new one, a server
// checked UP stays fully UP. `set server health up` after it puts the new address in traffic
// at once, checks going on, as leaving maintenance did (a server that tracks another one has
// no health of its own to set).
func updateServer(be string, o, n *cfgparse.Server, disabled bool) (step, string) {
	ref := serverRef(be, n.Name)
	so, sn := o.Settings(), n.Settings()
	if !so.Known || !sn.Known {
		if o.Address == n.Address && slices.Equal(so.Raw, sn.Raw) && !disabled {
			return step{}, ""
		}
		return step{}, fmt.Sprintf("server %s changed and has a parameter this sidecar does not know", ref)
	}
	if !cfgparse.SameParams(so.Params, sn.Params) {
		return step{}, fmt.Sprintf("server %s: parameters other than address, weight and disabled changed", ref)
	}
	s := step{kind: KindServerUpdated, what: "update server " + ref, backend: be, server: n.Name}
	maint := disabled
	if o.Address != n.Address {
		if !o.HostPort() || !n.HostPort() {
			return step{}, fmt.Sprintf("server %s: address %q -> %q cannot be set at runtime (only IP:port)", ref, o.Address, n.Address)
		}
		addr, port := n.AddrPort()
		if err := checkPort(port); err != nil {
			return step{}, fmt.Sprintf("server %s: %v", ref, err)
		}
		s.cmds = append(s.cmds, command{
			line:    fmt.Sprintf("set server %s addr %s port %d", ref, addr, port),
			expect:  prefix("IP changed", "no need to change", "port changed"),
			oneLine: true,
		})
		if !maint && !sn.Disabled && sn.Check && !tracks(sn) {
			s.cmds = append(s.cmds, command{line: "set server " + ref + " health up", expect: empty, silent: true})
		}
	}
	if so.Weight != sn.Weight {
		if err := checkWeight(sn.Weight); err != nil {
			return step{}, fmt.Sprintf("server %s: %v", ref, err)
		}
		s.cmds = append(s.cmds, command{line: fmt.Sprintf("set weight %s %d", ref, sn.Weight), expect: empty, silent: true})
	}
	switch {
	case sn.Disabled && !maint:
		s.cmds = append(s.cmds, command{line: "set server " + ref + " state maint", expect: empty, silent: true})
	case !sn.Disabled && maint:
		s.cmds = append(s.cmds, command{line: "set server " + ref + " state ready", expect: empty, silent: true})
	}
	return s, ""
}

// tracks reports whether the server's state follows another server's (track).
func tracks(st cfgparse.Settings) bool {
	return slices.ContainsFunc(st.Params, func(p cfgparse.Param) bool { return p.Keyword == "track" })
}

// removeServer puts a server in maintenance (stopping its agent first: an agent could bring it
// back) and deletes it.
func removeServer(be string, o *cfgparse.Server, zombie bool) step {
	ref := serverRef(be, o.Name)
	s := step{kind: KindServerRemoved, what: "delete server " + ref, remove: true, backend: be, server: o.Name, removed: o}
	if zombie {
		s.kind, s.bestEffort = "", true
		s.what = "delete server " + ref + " again (it had connections)"
	} else {
		st := o.Settings()
		if st.Agent {
			s.cmds = append(s.cmds, command{line: "disable agent " + ref, expect: empty, silent: true})
		}
		if !st.Disabled {
			s.cmds = append(s.cmds, command{line: "set server " + ref + " state maint", expect: empty, silent: true})
		}
	}
	s.cmds = append(s.cmds, command{line: "del server " + ref, expect: deleted, oneLine: true})
	return s
}

// diffCerts adds the steps for certificate files whose content changed, and for files added to
// or removed from a directory bound with "crt <dir>".
func (d *differ) diffCerts() {
	old, new := d.old.certs, d.new.certs
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range new {
		names[n] = true
	}
	// Where the files are used is read from every section: only when a file changed.
	var use *cfgparse.CertUse
	var steps []step
	ok := true
	for _, name := range sortedKeys(names) {
		o, inOld := old[name]
		n, inNew := new[name]
		if inOld && inNew && bytes.Equal(o, n) {
			continue
		}
		file := name + ".pem"
		if use == nil {
			use = d.old.cfg.CertUse(d.sslDir)
		}
		if d.sslDir == "" || !use.Used(file) {
			continue // HAProxy does not load it: writing the file is all there is to do
		}
		if use.Other[file] || use.OtherDir {
			d.needReload("certificate %q is used where the runtime API cannot replace it (ca-file, crt-list, crt-base, a server...)", name)
			ok = false
			continue
		}
		var paths []string
		for _, p := range use.Files[file] {
			paths = appendUnique(paths, p)
		}
		for _, dir := range use.Dirs {
			paths = appendUnique(paths, dir+"/"+file)
		}
		if i := slices.IndexFunc(paths, func(p string) bool { return !cfgparse.Plain(p) || checkPath(p) != nil }); i >= 0 {
			d.needReload("certificate %s: path %s cannot be written on the runtime API", quote(name), quote(paths[i]))
			ok = false
			continue
		}
		switch {
		case inOld && inNew:
			pl, err := payload(n)
			if err != nil {
				d.needReload("certificate %q: %v", name, err)
				ok = false
				continue
			}
			st := step{kind: KindCertUpdated, what: "replace certificate " + name}
			for _, p := range paths {
				st.cmds = append(st.cmds, setCert(p, pl)...)
			}
			steps = append(steps, st)
		case inNew:
			if len(use.Files[file]) > 0 {
				d.needReload("certificate %q is new and a bind line names its file", name)
				ok = false
				continue
			}
			pl, err := payload(n)
			if err != nil {
				d.needReload("certificate %q: %v", name, err)
				ok = false
				continue
			}
			st := step{kind: KindCertAdded, what: "add certificate " + name}
			for _, dir := range use.Dirs {
				p := dir + "/" + file
				st.cmds = append(st.cmds, command{line: "new ssl cert " + p, expect: contains("New empty certificate store")})
				st.cmds = append(st.cmds, setCert(p, pl)...)
				st.cmds = append(st.cmds, command{line: "add ssl crt-list " + dir + " " + p, expect: contains("Success!")})
			}
			steps = append(steps, st)
		default:
			if len(use.Files[file]) > 0 {
				d.needReload("certificate %q was removed and a bind line names its file", name)
				ok = false
				continue
			}
			st := step{kind: KindCertRemoved, what: "remove certificate " + name}
			for _, dir := range use.Dirs {
				p := dir + "/" + file
				st.cmds = append(st.cmds,
					command{line: "del ssl crt-list " + dir + " " + p, expect: contains("deleted in crtlist")},
					command{line: "del ssl cert " + p, expect: contains("deleted!")})
			}
			steps = append(steps, st)
		}
	}
	if ok {
		d.certSteps = steps
		d.certsDone = true
	}
}

func setCert(p, payload string) []command {
	return []command{
		{line: "set ssl cert " + p + " <<", payload: payload, expect: contains("Transaction created", "Transaction updated"), abort: "abort ssl cert " + p},
		{line: "commit ssl cert " + p, expect: contains("Success!"), abort: "abort ssl cert " + p},
	}
}

// payload is a PEM as the CLI takes it: an empty line ends a payload, so there must be none.
func payload(pem []byte) (string, error) {
	var lines []string
	for _, l := range strings.Split(string(pem), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", fmt.Errorf("empty PEM")
	}
	p := strings.Join(lines, "\n")
	if err := checkPayload(p); err != nil {
		return "", err
	}
	return p, nil
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReloadPlan is a plan that makes nothing at runtime and asks for a reload (why).
func ReloadPlan(why string) *Plan { return &Plan{reason: why} }
