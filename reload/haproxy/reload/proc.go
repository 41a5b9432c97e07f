package reload

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Proc is the master CLI's `show proc`.
type Proc struct {
	MasterPID int
	Reloads   int // reloads of the master, failed ones included
	Failed    int // failed reloads since the last successful one (0 after a success)
	// Workers counts the workers of the current configuration: the ones serving.
	Workers int
	// OldWorkers are workers of previous configurations still finishing their connections.
	OldWorkers int
	Version    string // the master's version, as HAProxy prints it ("3.2.26-1")
	Raw        string
}

var (
	failedRe  = regexp.MustCompile(`\[failed:\s*(\d+)\]`)
	versionRe = regexp.MustCompile(`^(\d+)\.(\d+)`)
)

// AtLeast reports whether the master is HAProxy major.minor or newer (false when its version
// cannot be read).
func (p Proc) AtLeast(major, minor int) bool {
	m := versionRe.FindStringSubmatch(p.Version)
	if m == nil {
		return false
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	return maj > major || maj == major && mnr >= minor
}

// ParseProc parses the output of `show proc` of HAProxy 2.x and 3.x (testdata/ has real ones):
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	5693            master          4 [failed: 1]   0d00h00m11s     2.6.12-1+deb12u4
//	# workers
//	5850            worker          1               0d00h00m04s     2.6.12-1+deb12u4
//	# old workers
//	5837            worker          2               0d00h00m05s     2.6.12-1+deb12u4
//	# programs
//
// Sections may be missing or empty (3.2 prints "# programs" only with programs, 3.3 has none),
// and lines it does not know are skipped. A worker's reloads column counts reloads since it
// started, failed ones included, so it does not tell old workers from current ones: the
// section does. From 3.1 on, a failed reload leaves "# workers" empty and lists the worker
// that keeps serving under "# old workers" (it was marked leaving when the reload began): that
// worker, the old one with the fewest reloads, is counted as current.
func ParseProc(out string) (Proc, error) {
	p := Proc{Raw: out, MasterPID: -1}
	section := ""
	minOld := -1
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch f[1] {
		case "master":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				return Proc{Raw: out}, fmt.Errorf("parse show proc: master reloads %q: %w", f[2], err)
			}
			p.MasterPID, p.Reloads = pid, n
			if m := failedRe.FindStringSubmatch(line); m != nil {
				p.Failed, _ = strconv.Atoi(m[1])
			}
			p.Version = f[len(f)-1]
		case "worker":
			if !strings.HasPrefix(section, "old") {
				p.Workers++
				continue
			}
			p.OldWorkers++
			if n, err := strconv.Atoi(f[2]); err == nil && (minOld < 0 || n < minOld) {
				minOld = n
			}
		}
	}
	if p.MasterPID < 0 {
		return Proc{Raw: out}, fmt.Errorf("parse show proc: no master line in %q", strings.TrimSpace(out))
	}
	if p.Workers == 0 && p.OldWorkers > 0 && p.Failed > 0 {
		p.Workers, p.OldWorkers = 1, p.OldWorkers-1
	}
	return p, nil
}
