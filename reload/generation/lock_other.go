//go:build !unix

package generation

// Lock does nothing where flock does not exist: `run` is for Linux (the render and validate
// commands, which run anywhere, take no lock).
func Lock(stateDir string) (unlock func(), err error) { return func() {}, nil }
