package runtimeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// Map files go live through an atomic swap of the map's entries (HAProxy 2.6 and later):
//
//	prepare map <path>              -> "New version created: <ver>"
//	add map @<ver> <path> <<        payload: one "key value" line per entry, in file order
//	commit map @<ver> <path>        every user of the map sees the new entries at once
//
// HAProxy names a map by its file's path as written in the configuration (`show map` lists
// them); one file is one map however many converters use it (map, map_beg, map_reg... share
// its entries, each indexing them for its own match), so one swap updates them all. Entries
// are sent in file order: the matches HAProxy runs through a list (map_reg, map_sub, map_end,
// map_dom...) return the first entry that matches in that order, as after a reload (map and
// map_beg look up trees: exact key, longest prefix). A swap rather than set/add/del of single
// entries:
// those cannot keep that order nor duplicate keys, and a reader would see the map half
// changed; a swap costs sending every entry (docs/runtime-api.md has the times).

// defaultMapPayload bounds the payload of one add map command, and so the longest map line.
// HAProxy reads a command line and its payload into one buffer of tune.bufsize bytes (16 kB by
// default); a larger one is dropped (measured: 2.6 closes the connection with no answer, 3.0
// and 3.2 answer "The command is too big for the buffer size"), and a map line longer than that
// buffer is read as two entries when HAProxy loads the file. The default buffer less
// mapCommandRoom: one payload of 14 kB rather than two of 8 kB saves the master socket's
// relay of a command to the worker (at 3,003 entries, 10 payloads rather than 18: about 2 ms
// of the swap's 8); measured through the master socket in interactive mode on 2.6, 3.0, 3.2
// and 3.4, which took up to 16,300 bytes.
const defaultMapPayload = 16384 - mapCommandRoom

// mapCommandRoom is what a buffer keeps for the command line of a payload (the map's path).
const mapCommandRoom = 2048

// mapSwap replaces the entries of one map.
type mapSwap struct {
	path     string   // as the configuration names it: <mapsdir>/<name>
	payloads []string // "key value" lines, each payload within the bound
	entries  int
	// sentinel is an entry put in a version of its own, never committed, when the map HAProxy
	// runs has no entries (see swapMaps); "" when not needed.
	sentinel string
	// edits, when set, are the entries that changed, sent instead of the swap (mapedit.go):
	// payloads and sentinel are not used.
	edits []mapEdit
}

func (m *mapSwap) prepare() string          { return "prepare map " + m.path }
func (m *mapSwap) add(ver string) string    { return "add map @" + ver + " " + m.path + " <<" }
func (m *mapSwap) commit(ver string) string { return "commit map @" + ver + " " + m.path }
func (m *mapSwap) clear(ver string) string  { return "clear map @" + ver + " " + m.path }

// lines are the command lines of the swap, payloads left out.
func (m *mapSwap) lines(ver string) []string {
	if m.edits != nil {
		out := make([]string, len(m.edits))
		for i := range m.edits {
			out[i] = m.edits[i].line(m.path)
		}
		return out
	}
	var out []string
	if m.sentinel != "" {
		out = append(out, m.prepare(), m.add(ver+"-1"))
	}
	out = append(out, m.prepare())
	for range m.payloads {
		out = append(out, m.add(ver))
	}
	return append(out, m.commit(ver))
}

// check checks every command line and payload of the swap (values.go).
func (m *mapSwap) check() error {
	if err := checkPath(m.path); err != nil {
		return err
	}
	for _, l := range append(m.lines("1"), m.clear("1")) {
		if err := checkLine(l); err != nil {
			return err
		}
	}
	for _, p := range m.payloads {
		if err := checkPayload(p); err != nil {
			return err
		}
	}
	if m.sentinel != "" {
		return checkPayload(m.sentinel)
	}
	return nil
}

// diffMaps adds a swap for every map file whose content changed. A map file added or removed
// needs a reload: HAProxy loads the map files the configuration names when it loads the
// configuration, and only those can be changed at runtime.
func (d *differ) diffMaps() {
	old, new := d.old.maps, d.new.maps
	limit := mapPayloadLimit(d.old.cfg)
	var steps []step
	ok := true
	d.new.keys = map[string]*keyIndex{} // the new Model is the differ's own until the plan is made
	fail := func(format string, args ...any) {
		d.needReload(format, args...)
		ok = false
	}
	for _, name := range sortedKeys(union(old, new)) {
		o, inOld := old[name]
		n, inNew := new[name]
		switch {
		case inOld && inNew && bytes.Equal(o, n):
			if x := d.old.keys[name]; x != nil {
				d.new.keys[name] = x
			}
			continue
		case !inOld:
			fail("map file %s is new (HAProxy loads map files with the configuration)", quote(name))
			continue
		case !inNew:
			fail("map file %s was removed", quote(name))
			continue
		case d.mapsDir == "":
			fail("map file %s changed and the map directory is not known", quote(name))
			continue
		}
		sw := &mapSwap{path: d.mapsDir + "/" + name}
		if err := checkPath(sw.path); err != nil {
			fail("map file %s: its path cannot be written on the runtime API: %v", quote(name), err)
			continue
		}
		edits, same, editable, keys := entryEditsKeyed(o, n, limit, maxLineDiff, func() *keyIndex { return d.oldKeys(name, o) })
		if keys == nil {
			keys = newKeyIndex(n) // many lines changed: the file is read whole anyway
		}
		d.new.keys[name] = keys
		if editable && (same || treeOnly(d.new.cfg, sw.path)) {
			if len(edits) > 0 { // none: the same entries, or moved, which a tree does not see
				sw.edits = edits
				steps = append(steps, step{kind: KindMapUpdated, what: editsWhat(edits, name), swap: sw})
			}
			continue
		}
		var err error
		if sw.payloads, sw.entries, err = mapPayloads(n, limit); err != nil {
			fail("map file %s: %v", quote(name), err)
			continue
		}
		same, oldEntries, oldErr := samePayloads(o, limit, sw.payloads)
		if oldErr == nil && same {
			continue // comments, blank lines, spacing: the same entries, the file is all
		}
		if sw.entries > 0 && (oldErr == nil && oldEntries == 0 || oldErr != nil && !hasEntries(o)) {
			sw.sentinel, _, _ = strings.Cut(sw.payloads[0], "\n")
		}
		steps = append(steps, step{kind: KindMapUpdated, what: "replace map " + name, swap: sw})
	}
	if ok {
		d.mapSteps = steps
		d.mapsDone = true
	}
}

// oldKeys is the index of the keys of the old map file name, content o: the old Model's, or
// made now (once: the plans after this one derive theirs from it).
func (d *differ) oldKeys(name string, o []byte) *keyIndex {
	if x := d.old.keys[name]; x != nil {
		return x
	}
	return newKeyIndex(o)
}

func union(a, b map[string][]byte) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// mapPayloadLimit is the bound of one payload for the configuration HAProxy runs: its
// tune.bufsize less mapCommandRoom when that is set lower than the default (half of it when
// that leaves less than half).
func mapPayloadLimit(cfg *cfgparse.Config) int {
	limit := defaultMapPayload
	for _, s := range cfg.Sections {
		if s.Kind != "global" {
			continue
		}
		for _, l := range s.Lines {
			if v, ok := strings.CutPrefix(l, "tune.bufsize "); ok {
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					limit = min(limit, max(n-mapCommandRoom, n/2))
				}
			}
		}
	}
	return limit
}

// mapPayloads reads a map file as HAProxy does when it loads it (pat_ref_read_from_file_smp,
// the same in 2.6 to 3.2): a line starting with '#' is a comment; leading spaces and tabs
// are skipped and a line left empty is ignored; the key runs to the first space or tab; the
// value is the rest of the line, spaces and tabs around it removed. It returns the entries as
// the payload of add map takes them ("key value", one a line: the key up to the first space
// or tab, the value the rest of the line after spaces and tabs), in payloads within limit
// bytes.
//
// What the runtime API cannot set exactly as a reload would load it is an error: an entry
// with no value (add map needs one), a key or value with a control character (a tab inside
// a value included) or that is not valid UTF-8, a line longer than limit. A CR ending a line
// is allowed (HAProxy stops the value there).
func mapPayloads(content []byte, limit int) (payloads []string, entries int, err error) {
	var b strings.Builder
	entries, err = eachMapEntry(content, limit, func(key, value string, rest int) {
		entry := len(key) + 1 + len(value)
		if b.Len() > 0 && b.Len()+1+entry > limit {
			payloads = append(payloads, b.String())
			b.Reset()
		}
		if b.Len() == 0 {
			b.Grow(min(limit, entry+rest)) // one allocation per payload, not a doubling series
		} else {
			b.WriteByte('\n')
		}
		b.WriteString(key)
		b.WriteByte(' ')
		b.WriteString(value)
	})
	if err != nil {
		return nil, 0, err
	}
	if b.Len() > 0 {
		payloads = append(payloads, b.String())
	}
	return payloads, entries, nil
}

// samePayloads says whether the map file content gives payloads (mapPayloads with the same
// limit), without making its own: the entries give the payloads, so the same entries in the
// same order give the same ones. entries and err are mapPayloads'.
func samePayloads(content []byte, limit int, payloads []string) (same bool, entries int, err error) {
	same = true
	cur, next := "", payloads
	entries, err = eachMapEntry(content, limit, func(key, value string, _ int) {
		if !same {
			return
		}
		if cur == "" {
			if len(next) == 0 {
				same = false
				return
			}
			cur, next = next[0], next[1:]
		}
		line := cur
		if i := strings.IndexByte(cur, '\n'); i >= 0 {
			line, cur = cur[:i], cur[i+1:]
		} else {
			cur = ""
		}
		same = len(line) == len(key)+1+len(value) && line[:len(key)] == key && line[len(key)] == ' ' && line[len(key)+1:] == value
	})
	return same && cur == "" && len(next) == 0, entries, err
}

// eachMapEntry calls fn with each entry of a map file, as mapPayloads reads them, and the
// number of bytes after its line.
func eachMapEntry(content []byte, limit int, fn func(key, value string, rest int)) (entries int, err error) {
	rest := string(content)
	for n := 1; rest != ""; n++ {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if len(line)+1 > limit {
			return 0, fmt.Errorf("line %d is longer than %d bytes", n, limit-1)
		}
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			continue
		}
		key, value := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			key, value = line[:i], strings.Trim(line[i:], " \t")
		}
		if err := checkMapText(key); err != nil {
			return 0, fmt.Errorf("line %d: the key %w", n, err)
		}
		if value == "" {
			return 0, fmt.Errorf("line %d: key %s has no value (the runtime API cannot add an entry without one)", n, quote(key))
		}
		if err := checkMapText(value); err != nil {
			return 0, fmt.Errorf("line %d: the value of key %s %w", n, quote(key), err)
		}
		fn(key, value, len(rest))
		entries++
	}
	return entries, nil
}

// hasEntries reports whether HAProxy reads at least one entry from a map file (see
// mapPayloads).
func hasEntries(content []byte) bool {
	for _, line := range strings.Split(string(content), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimLeft(line, " \t")
		if line != "" && line[0] != '\r' && line[0] != 0 {
			return true
		}
	}
	return false
}

// checkMapText checks a map key or value: valid UTF-8, no control character.
func checkMapText(v string) error {
	if !utf8.ValidString(v) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range v {
		if r < ' ' || r == 0x7f || unicode.IsControl(r) {
			return errors.New("has a control character")
		}
	}
	return nil
}

// swapMaps replaces the entries of the maps HAProxy loaded: each map prepared and filled, then
// all committed in one exchange, so that they change together as far as HAProxy allows (it
// runs the commits one after the other). A map file HAProxy did not load (the configuration
// does not name it) needs nothing but the file written.
//
// The sentinel works around HAProxy's lookup cache (tune.pattern.cache-size): the matches that
// run through a list (map_reg, map_sub...) cache their results per thread, under a revision
// of the map that adding entries and deleting them change, but a commit does not. A commit
// deletes the entries of the versions before it; when there were none (the map HAProxy ran
// was empty), the revision stays, and a result a request cached between the last add and the
// commit, from the empty map, is served after the commit for good (measured on 2.6.12 and
// 3.0.11: map_reg answered "no match" on the threads that had cached it; 3.2.26 did not). An
// entry in a version of its own, never committed, is deleted by the commit, which changes
// the revision.
func (u *Updater) swapMaps(ctx context.Context, steps []step) (err error) {
	if len(steps) == 0 {
		return nil
	}
	loaded, err := u.loadedMaps(ctx)
	if err != nil {
		return err
	}
	var commits []command
	var clears []string
	defer func() {
		if err != nil {
			// Best effort: a failed update reloads, which drops the versions anyway.
			for _, c := range clears {
				_, _ = u.opts.Client.Command(ctx, u.opts.Prefix+c) // not the session: it may be what failed
			}
		}
	}()
	for _, st := range steps {
		sw := st.swap
		used, err := loaded.use(sw.path)
		if err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		if !used {
			u.log.Debug("map file not loaded by HAProxy: written only", "map", sw.path)
			continue
		}
		if sw.edits != nil {
			// Made live with the commits, in their order (mapedit.go).
			for _, l := range sw.lines("") {
				commits = append(commits, command{line: l, expect: empty, silent: true})
			}
			continue
		}
		if sw.sentinel != "" {
			ver, err := u.prepareMap(ctx, sw)
			if err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
			clears = append(clears, sw.clear(ver))
			if err := u.run(ctx, []command{{line: sw.add(ver), payload: sw.sentinel, expect: added, raw: true}}); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		ver, err := u.prepareMap(ctx, sw)
		if err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		clears = append(clears, sw.clear(ver))
		adds := make([]command, len(sw.payloads))
		for i, p := range sw.payloads {
			adds[i] = command{line: sw.add(ver), payload: p, expect: added, raw: true}
		}
		if err := u.runTogether(ctx, adds); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		commits = append(commits, command{line: sw.commit(ver), expect: empty, silent: true})
	}
	// Never clear a version once its commit may have been made: it would empty the live map.
	clears = nil
	if err := u.batch(ctx, commits, nil); err != nil {
		return fmt.Errorf("commit maps: %w", err)
	}
	return nil
}

// prepareMap allocates a new version of the map and returns its number.
func (u *Updater) prepareMap(ctx context.Context, sw *mapSwap) (ver string, err error) {
	prepare := command{line: sw.prepare(), expect: func(answer string) error {
		v, ok := strings.CutPrefix(answer, "New version created: ")
		if !ok || v == "" || len(v) > 10 || strings.TrimLeft(v, "0123456789") != "" {
			return fmt.Errorf("unexpected answer %q", firstLine(answer))
		}
		ver = v
		return nil
	}}
	err = u.run(ctx, []command{prepare})
	return ver, err
}

// added: add map with a payload answers one empty line; no answer at all is a payload HAProxy
// dropped (larger than its buffer, on 2.6).
func added(answer string) error {
	switch answer {
	case "\n":
		return nil
	case "":
		return errors.New("no answer (a payload larger than HAProxy's buffer is dropped)")
	}
	return fmt.Errorf("unexpected answer %q", firstLine(answer))
}

// patternFiles are the files HAProxy loaded as maps and as ACL pattern files.
type patternFiles struct{ maps, acls map[string]bool }

// loadedMaps asks HAProxy which files it loaded as maps and as ACL pattern files.
func (u *Updater) loadedMaps(ctx context.Context) (patternFiles, error) {
	answer, err := u.together(ctx, []string{u.opts.Prefix + "show map", u.opts.Prefix + "show acl"})
	if err != nil {
		return patternFiles{}, fmt.Errorf("show map: %w", err)
	}
	return parsePatternFiles(answer)
}

// parsePatternFiles reads the answers of show map and show acl, one after the other: each a
// header "# id (file) description", then a line per pattern reference, "<id> (<file>) <...>".
func parsePatternFiles(answer string) (patternFiles, error) {
	const header = "# id (file) description"
	var lists []map[string]bool
	for _, l := range strings.Split(answer, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case l == header:
			lists = append(lists, map[string]bool{})
		case l == "" || len(lists) == 0:
			if l != "" {
				return patternFiles{}, fmt.Errorf("show map: unexpected answer %q", firstLine(answer))
			}
		default:
			open := strings.IndexByte(l, '(')
			if open < 0 {
				return patternFiles{}, fmt.Errorf("show map: unexpected line %q", l)
			}
			file := l[open+1:]
			if end := strings.Index(file, ") "); end >= 0 {
				file = file[:end]
			} else {
				file = strings.TrimSuffix(file, ")")
			}
			if file != "" {
				lists[len(lists)-1][file] = true
			}
		}
	}
	if len(lists) != 2 {
		return patternFiles{}, fmt.Errorf("show map, show acl: %d lists in the answer %q", len(lists), firstLine(answer))
	}
	return patternFiles{maps: lists[0], acls: lists[1]}, nil
}

// use says whether HAProxy loaded path as a map (then a swap updates every use of it). Used
// in a way a map swap does not cover is an error (the change reloads): as an ACL pattern file
// only (`acl ... -f`), or under another spelling of its path (a separate copy of the map,
// which the swap would leave as it was).
func (f patternFiles) use(path string) (bool, error) {
	for _, set := range []map[string]bool{f.maps, f.acls} {
		for p := range set {
			if p != path && (filepath.Clean(p) == path || !filepath.IsAbs(p) && filepath.Base(p) == filepath.Base(path)) {
				return false, fmt.Errorf("HAProxy loaded map %s as %s too: the runtime API would update one of them only", quote(path), quote(p))
			}
		}
	}
	if !f.maps[path] && f.acls[path] {
		return false, fmt.Errorf("HAProxy loaded %s as an ACL pattern file: a map swap does not update it", quote(path))
	}
	return f.maps[path], nil
}
