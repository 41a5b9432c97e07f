package sidecar

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the sidecar's version, set at build time by the Makefile and the Dockerfile
// (-ldflags "-X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=..."): the
// repository's VERSION file, which the image's tag is too. A plain go build says 0.0.0-dev.
var Version = "0.0.0-dev"

// Revision is the commit the sidecar was built from (-dirty: with uncommitted changes), set at
// build time like Version; empty:
// the one go build recorded (vcs.revision), if any.
var Revision = ""

// BuildInfo is what the binary says about itself: `haproxy-sidecar version`, the start-up log
// line and haproxy_sidecar_build_info.
type BuildInfo struct {
	Version, Revision, GoVersion string
}

// Build is this binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if b.Revision == "" {
		b.Revision = vcsRevision()
	}
	return b
}

// vcsRevision is the commit go build recorded ("unknown" without one: built outside a git
// work tree, or with -buildvcs=false).
func vcsRevision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func (b BuildInfo) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", b.Version, b.Revision, b.GoVersion)
}
