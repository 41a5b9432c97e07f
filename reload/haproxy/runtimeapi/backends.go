package runtimeapi

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// Whole backends go live at runtime from HAProxy 3.4 on (management.txt of 3.4; measured on
// 3.4.7, docs/runtime-api.md):
//
//	add backend NAME from DEFAULTS   "New backend registered."  a backend of that named defaults
//	                                  section's settings, unpublished (traffic sent to it: 503)
//	add server NAME/S ...             its servers, as for any backend
//	publish backend NAME              "Backend published."  traffic may reach it
//	unpublish backend NAME            "Backend unpublished."
//	del backend NAME                  "Backend deleted." (after lines about its servers); only
//	                                  unpublished, without servers, and named by no other
//	                                  section ("This proxy cannot be removed at runtime due to
//	                                  other configuration elements pointing to it.")
//
// No experimental mode is needed. A new backend is made live before the map entries that send
// traffic to it (maps are swapped after backends and servers are added); a removed one is
// unpublished and deleted after the map entries that sent traffic to it are gone. A server of
// a removed backend that still has connections keeps the backend (unpublished) until it can be
// deleted: the backend is deleted with it, by a later update or by Tidy.

// Version is what the runtime API knows of the HAProxy it talks to: its version, from the
// `Version:` line of `show info`. The zero Version is not known.
type Version struct {
	Major, Minor int
	Full         string // as HAProxy prints it: "3.4.7-1"
}

func (v Version) String() string {
	if v.Full == "" {
		return "unknown"
	}
	return v.Full
}

// AtLeast reports whether v is major.minor or newer (false when not known).
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// parseVersion reads a version as HAProxy prints it ("3.4.7-1", "2.6.12-1+deb12u4").
func parseVersion(s string) Version {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return Version{Major: major, Minor: minor, Full: s}
}

// backendsAtRuntime says why the backends of what HAProxy runs cannot be added or removed at
// runtime ("" when they can).
func (d *differ) backendsAtRuntime() string {
	v := d.old.version
	switch {
	case v.Full == "":
		return "HAProxy's version is not known yet; from 3.4 on backends are added and removed at runtime"
	case !v.AtLeast(3, 4):
		return fmt.Sprintf("HAProxy %s cannot add or remove backends at runtime; 3.4 can", v)
	case d.old.cfg.Conditional || d.new.cfg.Conditional:
		return "the configuration has conditional blocks (.if)"
	}
	return ""
}

// diffBackends makes the steps that add the backends only the new rendering has and remove
// those only what HAProxy runs has; it asks for a reload when one of them cannot be made
// exactly as a reload would.
func (d *differ) diffBackends(added, removed []*cfgparse.Section) {
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	why := d.backendsAtRuntime()
	if why != "" {
		for _, b := range added {
			d.needReload("%s is new (%s)", describe(b), why)
		}
		for _, b := range removed {
			d.needReload("%s was removed (%s)", describe(b), why)
		}
		return
	}
	var creates, removes []step
	ok := true
	if len(added) > 0 {
		named := proxyNames(d.new.cfg)
		for _, b := range added {
			st, reason := d.addBackend(b, named)
			if reason != "" {
				d.needReload("%s is new and %s", describe(b), reason)
				ok = false
				continue
			}
			creates = append(creates, st...)
		}
	}
	if len(removed) > 0 {
		named := proxyNames(d.old.cfg)
		for _, b := range removed {
			st, reason := d.removeBackend(b, named)
			if reason != "" {
				d.needReload("%s was removed and %s", describe(b), reason)
				ok = false
				continue
			}
			removes = append(removes, st...)
		}
	}
	if ok {
		d.backendAdds, d.backendRemoves = creates, removes
	}
}

// addBackend is `add backend B from DEFAULTS`, its servers, `publish backend B`; or the reason
// it cannot be made so.
func (d *differ) addBackend(b *cfgparse.Section, named map[string]bool) ([]step, string) {
	if err := checkName("backend", b.Name); err != nil {
		return nil, err.Error()
	}
	if d.old.gone[b.Name] {
		return nil, "HAProxy still holds the backend of that name removed earlier (a server of it had connections)"
	}
	for _, s := range d.new.cfg.Sections {
		if s != b && s.Name == b.Name && s.Kind != "" {
			return nil, fmt.Sprintf("its name is also the name of %s", describe(s))
		}
	}
	if named[b.Name] {
		return nil, "a section names it (backends are added in file order)"
	}
	def := defaultsOf(d.new.cfg, b)
	switch {
	case def == nil || def.Name == "":
		return nil, "its defaults section has no name (add backend makes a backend from a named one: defaults NAME)"
	case checkName("defaults", def.Name) != nil:
		return nil, checkName("defaults", def.Name).Error()
	}
	for _, l := range b.Lines {
		// default-server lines are for its servers, which get them explicitly (addServer).
		if kw := keyword(l); kw != "default-server" {
			return nil, fmt.Sprintf("has a %q line of its own (a backend added at runtime has the settings of its defaults section only)", kw)
		}
	}
	st := step{kind: KindBackendAdded, what: "add backend " + b.Name, backend: b.Name, create: true}
	st.cmds = append(st.cmds, command{line: "add backend " + b.Name + " from " + def.Name, expect: contains("New backend registered"), oneLine: true})
	for _, s := range b.Servers {
		if err := checkName("server", s.Name); err != nil {
			return nil, fmt.Sprintf("a server's name cannot be written on the runtime API: %v", err)
		}
		add, reason := addServer(b.Name, s)
		if reason != "" {
			return nil, reason
		}
		st.cmds = append(st.cmds, add.cmds...)
	}
	st.cmds = append(st.cmds, command{line: "publish backend " + b.Name, expect: contains("Backend published"), oneLine: true})
	return []step{st}, ""
}

// removeBackend is `unpublish backend B`, its servers put in maintenance and deleted, then `del
// backend B` (when no server of it still has connections); or the reason it cannot be made so.
func (d *differ) removeBackend(b *cfgparse.Section, named map[string]bool) ([]step, string) {
	if err := checkName("backend", b.Name); err != nil {
		return nil, err.Error()
	}
	if named[b.Name] {
		return nil, "a section named it (HAProxy deletes no backend a section names)"
	}
	steps := []step{{kind: KindBackendRemoved, what: "unpublish backend " + b.Name, backend: b.Name, unpublish: true,
		cmds: []command{{line: "unpublish backend " + b.Name, expect: contains("Backend unpublished"), oneLine: true}}}}
	for _, s := range b.Servers {
		if err := checkName("server", s.Name); err != nil {
			return nil, fmt.Sprintf("a server's name cannot be written on the runtime API: %v", err)
		}
		st := removeServer(b.Name, s, false)
		st.kind = "" // counted with its backend
		steps = append(steps, st)
	}
	zombies := d.old.zombies[b.Name]
	for _, name := range sortedKeys(zombies) {
		steps = append(steps, removeServer(b.Name, zombies[name], true))
	}
	return append(steps, dropBackend(b.Name)), ""
}

// dropBackend deletes an unpublished backend without servers. Its answer has several lines
// (HAProxy reports the deletion of its servers again), so it is sent on its own.
func dropBackend(name string) step {
	return step{what: "delete backend " + name, backend: name, drop: true,
		cmds: []command{{line: "del backend " + name, expect: contains("Backend deleted")}}}
}

// defaultsOf is the defaults section a proxy section takes its settings from: the one its
// header names with "from", else the last one above it.
func defaultsOf(cfg *cfgparse.Config, sec *cfgparse.Section) *cfgparse.Section {
	var last *cfgparse.Section
	for _, s := range cfg.Sections {
		if s == sec {
			break
		}
		if s.Kind == "defaults" {
			if sec.From != "" && s.Name == sec.From {
				return s
			}
			last = s
		}
	}
	if sec.From != "" {
		return nil
	}
	return last
}

// proxyNames are the names the sections of cfg may refer to a proxy by: every run of name
// characters in their lines and server parameters (use_backend B, default_backend B, track
// B/S, nbsrv(B)...). It takes more than HAProxy would (a string in an expression, a map's
// default value): a backend it takes is added or removed by a reload, which is always right.
func proxyNames(cfg *cfgparse.Config) map[string]bool {
	names := map[string]bool{}
	seen := map[string]bool{} // server parameters repeat ("check"...): each read once
	add := func(w string) {
		if seen[w] {
			return
		}
		seen[w] = true
		for _, f := range strings.FieldsFunc(w, notNameChar) {
			names[f] = true
		}
	}
	for _, s := range cfg.Sections {
		for _, l := range s.Lines {
			add(l)
		}
		for _, sv := range s.Servers {
			for _, p := range sv.Params {
				add(p)
			}
		}
	}
	return names
}

func notNameChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == ':' || r == '_' || r == '-')
}
