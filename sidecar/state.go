package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// loadState reads the JSON state file name of a state directory (read reads a file of it by
// name: the Store's ReadState, or stateIn's for a running sidecar's); nil when there is none.
func loadState[T any](read func(name string) ([]byte, error), name string) (*T, error) {
	b, err := read(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &v, nil
}
