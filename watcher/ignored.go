package watcher

// A big manifest of kinds the sidecar does not use (the Deployments of a whole cluster) costs
// a read when it changes, but its objects need not be decoded again, nor kept: each is decoded
// once (strictly: it must be valid), then only its key is kept, in its file's entry
// (fileEntry.ignored). When the file changes (a line appended), the objects whose key is known
// are skipped as they are read (a YAML document before it is even converted), and only the
// new ones are decoded. Only with the decoder's cache (PodConverter): the keys are its hashes.

// ignoring is what a file being read had, and still has, that nothing reads.
type ignoring struct {
	// before are the keys the files being read again had in their last version.
	before []map[docKey]string
	// still are the keys of the file being read (readFile) found in before: no job is made
	// for them.
	still map[docKey]string
}

// yamlDocument is the kind prefix of the keys of YAML documents: no List's (gvkString) can be
// it.
const yamlDocument = "yaml document"

// was says whether k was ignored in the last version of a file being read again, and with
// which List kind prefix.
func (g *ignoring) was(k docKey) (prefix string, ok bool) {
	for _, m := range g.before {
		if p, ok := m[k]; ok {
			return p, true
		}
	}
	return "", false
}

// note records that k (prefix) is still in the file being read.
func (g *ignoring) note(k docKey, prefix string) {
	if g.still == nil {
		g.still = map[docKey]string{}
	}
	g.still[k] = prefix
}

// stillIgnored says whether the object with key k, given kind prefix by its List (or the YAML
// document with key k, prefix yamlDocument), was ignored in its file's last version; it is
// then recorded as still there, and needs no job.
func (d *manifestDecoder) stillIgnored(k docKey, prefix string) bool {
	if p, ok := d.ignoring.was(k); !ok || p != prefix {
		return false
	}
	d.ignoring.note(k, prefix)
	return true
}

// ignored is the result of an object nothing reads (a kind the sidecar does not use, a Secret
// it drops): empty, and with a cache one shared value.
func (d *manifestDecoder) ignored() *decoded {
	if d.cache != nil {
		return d.cache.ignored
	}
	return &decoded{}
}

// ignoredKeys are the keys of what a file read now holds that nothing reads: those known from
// its last version (still) and those of jobs decoded now, each by the kind prefix its List
// gives it (a YAML document by its own key). nil when there are none.
func ignoredKeys(still map[docKey]string, jobs []job) map[docKey]string {
	out := still
	for _, j := range jobs {
		if j.res == nil || j.res.kind() != "" || j.p == nil || !j.p.keyed || j.p.err != nil {
			continue
		}
		if out == nil {
			out = map[docKey]string{}
		}
		if j.p.doc != nil {
			out[j.p.doc.key] = yamlDocument // known before it is converted from YAML
		} else {
			out[j.p.key] = j.p.defaults
		}
	}
	return out
}
