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
	"hash"
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
	h := NewHasher()
	h.Config(f.Config)
	return h.Sum(f)
}

// Hasher computes Files.Hash in two steps: the configuration (Config), then the rest (Sum).
// The renderer hashes the configuration while it renders the map files: the hash of a large
// configuration is then not on the way of the sync.
type Hasher struct {
	h hash.Hash
	n [8]byte
}

// NewHasher returns a Hasher that has hashed nothing yet.
func NewHasher() *Hasher { return &Hasher{h: sha256.New()} }

// count hashes a count, as 8 bytes big-endian.
func (h *Hasher) count(k int) {
	binary.BigEndian.PutUint64(h.n[:], uint64(k))
	h.h.Write(h.n[:])
}

// write hashes b, length prefixed.
func (h *Hasher) write(b []byte) {
	h.count(len(b))
	h.h.Write(b)
}

// named hashes the files of m in name order, each name and content length prefixed.
func (h *Hasher) named(m map[string][]byte) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		h.write([]byte(name))
		h.write(m[name])
	}
}

// Config hashes the configuration: the first step, once.
func (h *Hasher) Config(config []byte) { h.write(config) }

// Sum hashes the rest of f (its certificates, map files and other files; not its Config,
// which Config was given) and returns the hash of the whole, as f.Hash does.
func (h *Hasher) Sum(f Files) string {
	h.named(f.Certs)
	if len(f.Maps) > 0 || len(f.Files) > 0 {
		h.write(nil)
		h.count(len(f.Maps))
		h.named(f.Maps)
		h.count(len(f.Files))
		h.named(f.Files)
	}
	return hex.EncodeToString(h.h.Sum(nil))
}
