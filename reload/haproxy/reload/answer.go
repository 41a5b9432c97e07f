package reload

import (
	"regexp"
	"strings"
)

// Outcome is what the master CLI's answer to `reload` says.
type Outcome int

const (
	// NoAnswer: HAProxy 2.6 answers nothing (the master re-executes and drops the
	// connection); a newer master may too when another reload replaced it meanwhile.
	NoAnswer Outcome = iota
	// Loaded: "Success=1" (2.7+), the new workers serve.
	Loaded
	// Refused: "Success=0" and the start-up logs that say why (2.7+).
	Refused
	// Busy: "Success=0" because a reload asked earlier is still starting its worker (3.1+):
	// nothing was done; ask again.
	Busy
)

// Answer is the master's answer to `reload` (or to `_loadstatus`, which has the same form).
type Answer struct {
	Outcome Outcome
	// Logs are the start-up logs after the "--" line.
	Logs string
}

var successRe = regexp.MustCompile(`(?m)^Success=([01])[ \t\r]*$`)

// ParseAnswer reads an answer of the form
//
//	Success=1
//	--
//	[NOTICE]   (4612) : Initializing new worker (4617)
//	[NOTICE]   (4612) : Loading success.
//
// (testdata/ has real ones of each version).
func ParseAnswer(out string) Answer {
	m := successRe.FindStringSubmatchIndex(out)
	if m == nil {
		return Answer{Outcome: NoAnswer, Logs: strings.TrimSpace(out)}
	}
	rest := out[m[1]:]
	if i := strings.Index(rest, "\n--\n"); i >= 0 {
		rest = rest[i+4:]
	} else {
		rest = strings.TrimPrefix(strings.TrimLeft(rest, "\r\n"), "--\n")
	}
	a := Answer{Logs: strings.TrimSpace(rest)}
	switch {
	case out[m[2]:m[3]] == "1":
		a.Outcome = Loaded
	case strings.Contains(a.Logs, "Another reload is still in progress"):
		a.Outcome = Busy
	default:
		a.Outcome = Refused
	}
	return a
}
