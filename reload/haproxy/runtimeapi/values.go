package runtimeapi

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Every value the runtime API path writes on a command line is checked here first. HAProxy's
// CLI reads a line up to "\n", splits it into commands at ";" and into words at spaces, and
// its parsers are lenient (measured on 2.6: `set server be/s addr 127.0.0.1 port 65536` answers
// "no need to change the port", `port 80x` sets port 80, trailing words are ignored): a value
// that is not exactly one well-formed word could change what a command does, or add commands.
// A value that fails a check makes the plan ask for a reload instead, so the rendering goes
// through haproxy -c (and the renderer's own checks) like any other change; nothing is sent.

// nameRE is what HAProxy accepts for proxy and server names (invalid_char() in its source:
// letters, digits, ".", ":", "_", "-").
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// hostRE is a DNS host name (RFC 1123 labels).
var hostRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// timeRE is an HAProxy time value: digits and an optional unit.
var timeRE = regexp.MustCompile(`^[0-9]{1,9}(us|ms|s|m|h|d)?$`)

// checkName checks a backend or server name.
func checkName(what, v string) error {
	if !nameRE.MatchString(v) {
		return fmt.Errorf("%s name %s is not a valid HAProxy name (letters, digits, '.', ':', '_', '-')", what, quote(v))
	}
	return nil
}

// checkToken checks a value is one word on a CLI line: not empty, printable, no white space,
// no control character, none of the characters that quote, escape, comment, expand or separate
// commands (" ' \ # $ ;), valid UTF-8.
func checkToken(v string) error {
	if v == "" {
		return fmt.Errorf("empty value")
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("value %s is not valid UTF-8", quote(v))
	}
	for _, r := range v {
		switch {
		case r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("value %s contains white space or a control character", quote(v))
		case strings.ContainsRune(`"'\#$;`, r):
			return fmt.Errorf("value %s contains %q", quote(v), r)
		}
	}
	return nil
}

// checkAddr checks an address the runtime API is given: an IP literal (no zone) or a host name.
func checkAddr(v string) error {
	if a, err := netip.ParseAddr(v); err == nil && a.Zone() == "" {
		return nil
	}
	if len(v) <= 253 && hostRE.MatchString(v) {
		return nil
	}
	return fmt.Errorf("address %s is neither an IP address nor a host name", quote(v))
}

// checkPort checks a TCP port: 1-65535.
func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("port %d is not within 1-65535", p)
	}
	return nil
}

// checkPortWord is checkPort for a written port: decimal digits only.
func checkPortWord(v string) error {
	p, err := strconv.Atoi(v)
	if err != nil || strings.TrimLeft(v, "0123456789") != "" {
		return fmt.Errorf("port %s is not a number", quote(v))
	}
	return checkPort(p)
}

// checkWeight checks a server weight: 0-256.
func checkWeight(w int) error {
	if w < 0 || w > 256 {
		return fmt.Errorf("weight %d is not within 0-256", w)
	}
	return nil
}

// checkPath checks a certificate path: absolute, one word.
func checkPath(v string) error {
	if err := checkToken(v); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if !strings.HasPrefix(v, "/") || strings.Contains(v, "<<") {
		return fmt.Errorf("path %s is not an absolute file path", quote(v))
	}
	return nil
}

// paramForms are the forms of the arguments of the server keywords `add server` is given that
// take something other than a free word.
var paramForms = map[string]func(string) error{
	"addr": checkAddr, "agent-addr": checkAddr,
	"port": checkPortWord, "agent-port": checkPortWord,
	"inter": checkTime, "fastinter": checkTime, "downinter": checkTime, "agent-inter": checkTime,
	"slowstart": checkTime, "pool-purge-delay": checkTime,
	"fall": checkCount, "rise": checkCount, "maxconn": checkCount, "maxqueue": checkCount,
	"minconn": checkCount, "pool-low-conn": checkCount, "pool-max-conn": checkCount,
	"error-limit": checkCount, "id": checkCount,
}

func checkTime(v string) error {
	if !timeRE.MatchString(v) {
		return fmt.Errorf("time %s is not a number with an optional unit", quote(v))
	}
	return nil
}

func checkCount(v string) error {
	if len(v) > 9 || strings.TrimLeft(v, "0123456789") != "" {
		return fmt.Errorf("%s is not a number", quote(v))
	}
	return nil
}

// checkParam checks the argument of a server keyword.
func checkParam(keyword, arg string) error {
	if err := checkToken(arg); err != nil {
		return fmt.Errorf("%q: %w", keyword, err)
	}
	if form := paramForms[keyword]; form != nil {
		if err := form(arg); err != nil {
			return fmt.Errorf("%q: %w", keyword, err)
		}
	}
	return nil
}

// checkLine is the last check of a command line before a plan holds it: one line of words
// separated by single spaces, each a token. It catches what the checks of each value would
// have missed.
func checkLine(line string) error {
	for _, w := range strings.Split(line, " ") {
		if w == "<<" {
			continue // the payload marker of set ssl cert
		}
		if err := checkToken(w); err != nil {
			return fmt.Errorf("command %s: %w", quote(line), err)
		}
	}
	return nil
}

// checkPayload checks a certificate payload: lines of printable characters, none empty (an
// empty line ends a payload).
func checkPayload(p string) error {
	for _, l := range strings.Split(p, "\n") {
		if l == "" {
			return fmt.Errorf("the payload has an empty line")
		}
		for _, r := range l {
			if r < ' ' && r != '\t' || r == 0x7f || r == utf8.RuneError {
				return fmt.Errorf("the payload has a control character")
			}
		}
	}
	return nil
}

// quote writes a value for an error message: Go-quoted (control characters visible), cut
// after 64 bytes.
func quote(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "..."
	}
	return strconv.Quote(v)
}
