//go:build !linux

package memory

import "errors"

// ReleaseBinaryPages: Linux only (MADV_PAGEOUT).
func ReleaseBinaryPages() (uintptr, error) {
	return 0, errors.New("not supported on this system")
}

// UnmapBinaryPages: Linux only.
func UnmapBinaryPages() (uintptr, error) {
	return 0, errors.New("not supported on this system")
}
