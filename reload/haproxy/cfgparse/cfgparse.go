// Package cfgparse reads a rendered haproxy.cfg into sections and server lines, enough to tell
// whether two configurations differ only in the servers of existing backends (which the runtime
// API can change without a reload) or in anything else.
//
// It does not interpret HAProxy's configuration language beyond that. Lines are compared as
// HAProxy's words, kept in their written form (quotes, escapes and trailing comments included),
// so two lines that differ in any way HAProxy could see are different; only blank lines,
// whole-line comments and the amount of white space between words are ignored.
package cfgparse

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// SectionKeywords are the words that open a section in HAProxy 2.x/3.x.
var SectionKeywords = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"userlist": true, "peers": true, "mailers": true, "resolvers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "fcgi-app": true, "log-forward": true,
	"namespace_list": true, "crt-store": true, "traces": true, "acme": true,
}

// Config is a parsed configuration.
type Config struct {
	// Sections in file order. Lines before the first section keyword form a section with an
	// empty Kind.
	Sections []*Section
	// Conditional is set when the file uses conditional blocks (.if/.elif/.else/.endif): which
	// server lines HAProxy loads then depends on conditions this package does not evaluate.
	Conditional bool
	// Lines are where the sections are in the text: Lines[i] is Sections[i]'s (read them with
	// Line and ServerLine). They are the Config's, not the sections': ParseAfter reuses a
	// section that lines added or removed above it moved as it is, without a copy (a new
	// Ingress's line above 10,000 backends moved them all, 3 MB per change). Empty for a
	// Config made otherwise: the lines are not known (0).
	Lines []SectionLines

	// uniqueProxies: no two sections with servers have the same key (false: not known).
	uniqueProxies bool
}

// SectionLines are where a section is in a configuration's text (int32: 8 bytes a section,
// 10,000 sections a change).
type SectionLines struct {
	// Header is the 1-based line of the header (0 for the implicit first section).
	Header int32
	// Servers is the line the servers' offsets count from: the header's line in the text the
	// servers are read from (another than Header's for a section whose servers are another
	// configuration's, Patched).
	Servers int32
}

// Line is the 1-based line of the header of Sections[i] (0 for the implicit first section, or
// when not known).
func (c *Config) Line(i int) int {
	if i >= len(c.Lines) {
		return 0
	}
	return int(c.Lines[i].Header)
}

// ServerLine is the 1-based line of server s of Sections[i] (0 when not known).
func (c *Config) ServerLine(i int, s *Server) int {
	if i >= len(c.Lines) || c.Lines[i].Servers == 0 {
		return 0
	}
	return int(c.Lines[i].Servers) + s.off
}

// Patched is c with the servers of some of its sections taken from sections of next (what
// HAProxy runs once servers were changed at runtime): from(i) is the index in next of the
// section whose servers Sections[i] takes, or -1 for its own. A section takes them as
// WithServers does, unless it is next's section itself (the same one, reused by ParseAfter),
// then it stays as it is; its header keeps its line in c, its servers have their lines in
// next.
func (c *Config) Patched(next *Config, from func(i int) int) *Config {
	out := *c
	out.Sections = slices.Clone(c.Sections)
	out.Lines = make([]SectionLines, len(c.Sections))
	for i, s := range c.Sections {
		out.Lines[i] = SectionLines{Header: int32(c.Line(i)), Servers: serversLine(c, i)}
		if j := from(i); j >= 0 {
			if ns := next.Sections[j]; ns != s {
				out.Sections[i] = s.WithServers(ns.Servers)
			}
			out.Lines[i].Servers = serversLine(next, j)
		}
	}
	return &out
}

// serversLine is where the server lines of c's section i begin (0 when not known).
func serversLine(c *Config, i int) int32 {
	if i >= len(c.Lines) {
		return 0
	}
	return c.Lines[i].Servers
}

// UniqueProxies reports that no two backend or listen sections have the same name: true is
// certain, false means there may be two (a Config made otherwise than by this package's
// parsers does not say). It costs nothing to ask.
func (c *Config) UniqueProxies() bool { return c.uniqueProxies }

// Section is one section: its header and its lines, server lines apart.
type Section struct {
	Kind   string   // "global", "defaults", "backend", ...; "" before the first section
	Name   string   // the proxy or section name ("" for global and unnamed defaults)
	Header []string // the header line's words as written (its line: Config.Line)
	// Lines are the section's other lines, each as its words joined by one space, in order.
	// Server lines of backend and listen sections are not among them.
	Lines []string
	// Servers are the server lines of a backend or listen section, in order.
	Servers []*Server
	// From is the defaults section named with "from" in the header, if any.
	From string

	defaultServer []string // words of this section's default-server lines, in order

	// What ParseAfter needs to reuse the section for the same bytes in the same context:
	// src is the section's text (its header line to the next header line), nl the number of
	// line ends in it, base the default-server words it inherits (backend and listen), cond
	// whether it has a conditional block's line. A section made otherwise (WithServers) has
	// no src and is never reused.
	src  string
	nl   int
	base []string
	cond bool
}

// HasServers reports whether the section kind holds server lines (backend, listen).
func (s *Section) HasServers() bool { return s.Kind == "backend" || s.Kind == "listen" }

// Key identifies the section in a configuration: kind and name.
func (s *Section) Key() string { return s.Kind + " " + s.Name }

// Server is one `server <name> <address> [params]` line, with the default-server parameters
// in effect where it is written.
type Server struct {
	Name    string
	Address string // as written, unquoted (see AddrPort)
	// Params are the server's own parameters as written (words after the address, up to a
	// comment).
	Params []string
	// Inherited are the default-server parameters in effect for this server: those of its
	// defaults section, then those of the default-server lines above it in its section.
	Inherited []string
	// off is the server line's place below its section's header line (Config.ServerLine).
	off int
}

// AddrPort is the address as an IP literal and a numeric port, when it is written that way;
// other forms (host names, unix sockets, port ranges, environment variables) give an invalid
// address. It is computed from Address: a configuration of 100,000 servers is smaller without
// it stored.
func (s *Server) AddrPort() (netip.Addr, int) { return splitAddress(s.Address) }

// HostPort reports whether the address is an IP literal with a numeric port.
func (s *Server) HostPort() bool {
	a, port := s.AddrPort()
	return a.IsValid() && port > 0
}

// Parse reads a configuration. It fails only on what HAProxy would reject too (an unterminated
// quote, a server line without an address). The Config refers to text, which must not be
// changed afterwards.
func Parse(text []byte) (*Config, error) { return ParseAfter(nil, text) }

// joined is the words separated by one space: the line itself, trimmed, when it is written
// so already (no allocation).
func joined(line string, words []string) string {
	t := strings.Trim(line, " \t\r")
	if len(t) == len(words[0]) || strings.HasPrefix(t, words[0]) && strings.HasSuffix(t, words[len(words)-1]) {
		n := len(words) - 1
		for _, w := range words {
			n += len(w)
		}
		if n == len(t) {
			return t
		}
	}
	return strings.Join(words, " ")
}

// inherited is the default-server words a proxy section gets from its defaults section (the one
// named with "from", else the last one above it), itself following its own "from" chain.
func inherited(sec *Section, named map[string]*Section, last *Section) []string {
	d := last
	if sec.From != "" {
		d = named[sec.From]
	}
	var chain []*Section
	for seen := map[*Section]bool{}; d != nil && !seen[d]; d = named[d.From] {
		seen[d] = true
		chain = append([]*Section{d}, chain...)
		if d.From == "" {
			break
		}
	}
	var out []string
	for _, d := range chain {
		out = append(out, d.defaultServer...)
	}
	return out
}

// parseServer reads the server line at line n, off lines below its section's header.
func parseServer(s *Server, words []string, n, off int, shared map[string][]string) error {
	if len(words) < 3 {
		return fmt.Errorf("line %d: server line without a name and an address", n)
	}
	*s = Server{Name: Unquote(words[1]), Address: Unquote(words[2]), off: off}
	params := words[3:]
	for i, w := range params {
		if strings.HasPrefix(w, "#") {
			params = params[:i] // a word that starts with # starts a comment
			break
		}
	}
	if len(params) > 0 {
		key := strings.Join(params, "\x00")
		if p, ok := shared[key]; ok && slices.Equal(p, params) { // words may hold a NUL
			s.Params = p
		} else {
			s.Params = slices.Clip(slices.Clone(params))
			shared[key] = s.Params
		}
	}
	return nil
}

// splitAddress reads "1.2.3.4:80" and "[::1]:80"; anything else (no port, a port range or
// offset, a host name, a prefix like ipv4@ or unix@) gives an invalid address.
func splitAddress(a string) (netip.Addr, int) {
	for i := 0; i < len(a); i++ {
		if c := a[i]; c == '@' || c == '$' || c == '/' {
			return netip.Addr{}, 0
		}
	}
	ap, err := netip.ParseAddrPort(a)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return netip.Addr{}, 0
	}
	// ParseAddrPort takes "::1:80"-style IPv6 without brackets as an error already; HAProxy's
	// own reading of such forms is ambiguous, so only the bracketed form counts.
	if ap.Addr().Is4In6() {
		return netip.Addr{}, 0
	}
	return ap.Addr(), int(ap.Port())
}

// FormatAddress writes an address and port as the runtime API and server lines take them.
func FormatAddress(a netip.Addr, port int) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}

// Words splits a line into HAProxy's words, each kept as written: quotes and backslash
// escapes stay in the word (use Unquote for the value). White space inside quotes or after a
// backslash does not split. An unquoted # starts a comment, even inside a word, as in
// HAProxy; the comment is kept as words (split at white space, quotes in it plain text), the
// first starting with #; callers that need to drop comments do so.
func Words(line string) ([]string, error) {
	return appendWords(nil, line)
}

// appendWords is Words appending to words.
func appendWords(words []string, line string) ([]string, error) {
	if out, ok := plainWords(words, line); ok {
		return out, nil
	}
	var b strings.Builder
	var quote byte
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && quote == '"' && i+1 < len(line) {
				i++
				b.WriteByte(line[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\\':
			inWord = true
			b.WriteByte(c)
			if i+1 < len(line) {
				i++
				b.WriteByte(line[i])
			}
		case c == '#':
			// A comment, as HAProxy reads one: an unquoted # anywhere ends the line's
			// words, so a quote in it ("it's") opens nothing. Its text is kept as words.
			if inWord {
				words = append(words, b.String())
			}
			return splitSpaces(words, line[i:]), nil
		case c == '"' || c == '\'':
			inWord = true
			quote = c
			b.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			inWord = true
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, b.String())
	}
	return words, nil
}

// plainWords appends the words of a line without quotes, escapes or comments: words are
// substrings of the line. ok is false when the line has a quote, a backslash or a #.
func plainWords(words []string, line string) (out []string, ok bool) {
	for i := 0; i < len(line); i++ {
		if c := line[i]; c == '"' || c == '\'' || c == '\\' || c == '#' {
			return words, false
		}
	}
	return splitSpaces(words, line), true
}

// splitSpaces appends the white-space separated substrings of line.
func splitSpaces(words []string, line string) []string {
	start := -1
	for i := 0; i <= len(line); i++ {
		if i == len(line) || isSpace(line[i]) {
			if start >= 0 {
				words = append(words, line[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return words
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// Unquote returns a word's value: quotes removed, backslash escapes resolved. Environment
// variables ("${X}") are not expanded.
func Unquote(w string) string {
	plain := true
	for i := 0; i < len(w) && plain; i++ {
		plain = w[i] != '"' && w[i] != '\'' && w[i] != '\\'
	}
	if plain {
		return w
	}
	var b strings.Builder
	var quote byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(w):
			i++
			b.WriteByte(w[i])
		case quote == '"' && c == '"':
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unquoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = Unquote(w)
	}
	return out
}

// Plain reports whether a word is written without quotes, escapes, comment signs or CLI
// command separators, so that it means the same on a configuration line and on the runtime
// API's command line.
func Plain(w string) bool {
	return w != "" && !strings.ContainsAny(w, "\"'\\#;$")
}

// Proxy returns the section with this kind and name, nil if none.
func (c *Config) Proxy(kind, name string) *Section {
	for _, s := range c.Sections {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	return nil
}

// Atoi is strconv.Atoi for a word.
func atoi(w string) (int, bool) {
	n, err := strconv.Atoi(Unquote(w))
	return n, err == nil
}
