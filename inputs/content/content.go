// Package content is the set of files one rendering gives HAProxy (the configuration, the
// certificates by name, the map files and the other files), the one hash that identifies such
// a set, and the rule for certificate names. The renderer makes it, the generation store
// writes it and names generations by its hash, and the Data Plane API reloader hashes what it
// reads back from the live paths with the same hash.
package content

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
)

// Files is one rendering's files.
type Files struct {
	Config []byte
	Certs  map[string][]byte // certificate name (without ".pem") -> PEM, written as <name>.pem
	Maps   map[string][]byte // file name -> content of a map file
	Files  map[string][]byte // file name -> content of another file (Lua, error pages, ...)
	// Secret are the lines that hold bytes derived from a secret value (not part of the hash:
	// it is what the renderer knows of the files, not their content).
	Secret SecretLines
}

// Hash is a hex SHA-256 over the config and the certificates in name order, each part length
// prefixed so that no two sets share an encoding; then, only when there are any (so that a
// set without them keeps the hash it had before they existed), an empty name (which no
// certificate has) and the map files and other files, each set counted and in name order.
//
// The hash is persisted (generation directory names, their hash file, the record of what
// HAProxy runs, the Data Plane API hosts' state): the same files must always give the same
// hash, or a restarted sidecar reloads HAProxy for nothing. TestHashIsStable pins it.
func (f Files) Hash() string {
	h := sha256.New()
	var n [8]byte
	count := func(k int) {
		binary.BigEndian.PutUint64(n[:], uint64(k))
		h.Write(n[:])
	}
	write := func(b []byte) {
		count(len(b))
		h.Write(b)
	}
	named := func(m map[string][]byte) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			write([]byte(name))
			write(m[name])
		}
	}
	write(f.Config)
	named(f.Certs)
	if len(f.Maps) > 0 || len(f.Files) > 0 {
		write(nil)
		count(len(f.Maps))
		named(f.Maps)
		count(len(f.Files))
		named(f.Files)
	}
	return hex.EncodeToString(h.Sum(nil))
}
