//go:build !unix

package haproxytest

// reservePort has no machine-wide lock here: the listen check alone.
func reservePort(int) (release func(), ok bool) { return func() {}, true }
