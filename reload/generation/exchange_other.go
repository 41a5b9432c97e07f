//go:build !linux

package generation

// exchange is not available outside Linux: the directory is renamed aside instead.
func exchange(a, b string) error { return errNoExchange }
