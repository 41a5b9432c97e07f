package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// hostState is what a host was last given, kept on disk (Config.StateFile) so that a
// restarted sidecar leaves the hosts that still have it alone: the hash of the content pushed,
// and the configuration version the host reported once it had it. Any change to the host's
// configuration, by anyone, moves the version. A hash that is not the live files' (another
// rendering, or a hash recorded by a sidecar that hashed differently) costs one push.
type hostState struct {
	Hash    string `json:"hash"`
	Version int64  `json:"version"`
}

// stateFile keeps every host's hostState in one JSON file, replaced atomically.
type stateFile struct {
	path  string
	mu    sync.Mutex
	hosts map[string]hostState // by endpoint (URL without credentials)
}

// openState reads path; a missing or unreadable file is an empty state (every host is
// pushed to once, as without a state file). An empty path keeps nothing.
func openState(path string) (*stateFile, error) {
	s := &stateFile{path: path, hosts: map[string]hostState{}}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s.hosts); err != nil {
		// A damaged file only costs one push per host.
		s.hosts = map[string]hostState{}
	}
	return s, nil
}

func (s *stateFile) get(endpoint string) (hostState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.hosts[endpoint]
	return st, ok
}

// set records a host's state (forgets it when st is the zero value) and writes the file.
func (s *stateFile) set(endpoint string, st hostState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == (hostState{}) {
		delete(s.hosts, endpoint)
	} else {
		s.hosts[endpoint] = st
	}
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(s.hosts)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".tmp-"+filepath.Base(s.path))
	if err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	return nil
}
