package content

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var certNameChars = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// CheckCertName reports why name cannot be a certificate name, or nil. The name becomes the
// file <name>.pem in the certificate directory and a word of the configuration, so it is
// letters, digits, '.', '_' and '-', not starting with a dot and without "..". Kubernetes
// object names (DNS subdomains) pass, and so do the NAMESPACE.NAME names of TLS Secrets.
func CheckCertName(name string) error {
	switch {
	case name == "":
		return errors.New("empty certificate name")
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("certificate name %q starts with a dot", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("certificate name %q contains \"..\"", name)
	case !certNameChars.MatchString(name):
		return fmt.Errorf("certificate name %q has characters other than letters, digits, '.', '_' and '-'", name)
	}
	return nil
}
