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

// fileNameRule is what an auxiliary file name may be: letters, digits, "-" and "_", with at
// most one extension of the same. The Data Plane API's storage renames any other name (it
// keeps only these characters and the last extension), so one rule serves every mode.
var fileNameRule = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$`)

// maxFileName bounds a file name (filesystems allow 255 bytes).
const maxFileName = 200

// CheckFileName reports why name cannot be the name of a map file or another auxiliary
// file, or nil.
func CheckFileName(name string) error {
	switch {
	case name == "":
		return errors.New("the file name is empty")
	case len(name) > maxFileName:
		return fmt.Errorf("the file name %q is longer than %d bytes", name, maxFileName)
	case !fileNameRule.MatchString(name):
		return fmt.Errorf("%q cannot be a file name: use letters, digits, '-' and '_', with at most one extension (NAME or NAME.EXT; the Data Plane API's storage renames any other name)", name)
	}
	return nil
}
