// Package redact keeps known secret values out of everything the sidecar says: logs, /readyz,
// Kubernetes Events, command errors, and HAProxy's own output quoted in them.
//
// Secrets are registered by group (the stats password, the Data Plane API credentials, the
// private keys of the certificates, environment values the operator marks secret) and each
// group is replaced as a whole when its values change, so a rotated secret is redacted from
// then on and a removed one is no longer searched for. Private key PEM blocks are redacted
// whether known or not.
package redact

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a secret value.
const Mask = "[REDACTED]"

// minLen is the shortest value redacted: a one- or two-character "secret" would mask every
// occurrence of that letter in every message and protect nothing.
const minLen = 3

// privateKeyBlock matches a PEM private key, complete or cut short.
var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)

// Redactor replaces registered secret values where they stand as tokens of their own. The
// zero value is ready; it is safe for concurrent use. A nil *Redactor redacts only private
// key blocks.
type Redactor struct {
	mu     sync.RWMutex
	groups map[string][]string
	secret *regexp.Regexp // every value, any case; nil: no values registered
	values []string       // the same, longest first
}

// Set replaces the secret values of group (values shorter than three bytes are ignored).
func (r *Redactor) Set(group string, values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[string][]string{}
	}
	var keep []string
	for _, v := range values {
		if len(v) >= minLen {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		delete(r.groups, group)
	} else {
		r.groups[group] = keep
	}
	var all []string
	for _, vs := range r.groups {
		all = append(all, vs...)
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	all = slices.Compact(all)
	r.values = all
	if len(all) == 0 {
		r.secret = nil
		return
	}
	quoted := make([]string, len(all))
	for i, v := range all {
		quoted[i] = regexp.QuoteMeta(v)
	}
	// Any case: HAProxy and templates print values upper- or lower-cased too.
	r.secret = regexp.MustCompile(`(?i)` + strings.Join(quoted, "|"))
}

// String returns s with every private key block masked, and every registered secret where it
// stands as a token of its own (see standsAlone): a password "services" is masked in
// "stats:services" and "password services", not in "examples/local/services.yaml",
// "web.services.svc" or "my-services".
func (r *Redactor) String(s string) string {
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = privateKeyBlock.ReplaceAllString(s, Mask)
	}
	if r == nil {
		return s
	}
	r.mu.RLock()
	re, values := r.secret, r.values
	r.mu.RUnlock()
	if re == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for pos := 0; pos < len(s); {
		loc := re.FindStringIndex(s[pos:])
		if loc == nil {
			break
		}
		i, j := pos+loc[0], pos+loc[1]
		if !standsAlone(s, i, j) {
			// A shorter value may stand alone where the longest one found does not.
			if j = aloneAt(s, i, values); j < 0 {
				pos = i + 1
				continue
			}
		}
		b.WriteString(s[last:i])
		b.WriteString(Mask)
		last, pos = j, j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// aloneAt is the end of the longest of values (longest first) found at i of s, in any case,
// that stands alone there; -1 when none does.
func aloneAt(s string, i int, values []string) int {
	for _, v := range values {
		if j := i + len(v); j <= len(s) && strings.EqualFold(s[i:j], v) && standsAlone(s, i, j) {
			return j
		}
	}
	return -1
}

// standsAlone reports whether s[i:j], a secret's text, is a token of its own: not the part of
// a longer word (a letter, digit or _ beside a letter, digit or _ of the secret), nor a part of
// a path (a / beside it), nor of a dotted or dashed name (a . or - beside it, then a letter or
// digit: a file name's extension, a host name, a Kubernetes name). Masking those would mangle
// the paths and names in messages when a secret is a common word, and protect nothing: a
// secret is used as a token (stats auth stats:PASSWORD, "password": "PASSWORD").
func standsAlone(s string, i, j int) bool {
	return sideAlone(s, i-1, -1, s[i]) && sideAlone(s, j, 1, s[j-1])
}

// sideAlone says whether the character at at (outside the secret, in direction dir) leaves
// the secret's edge character edge alone.
func sideAlone(s string, at, dir int, edge byte) bool {
	if at < 0 || at >= len(s) {
		return true
	}
	switch c := s[at]; {
	case wordByte(c):
		return !wordByte(edge)
	case c == '/':
		return false
	case c == '.' || c == '-':
		next := at + dir
		return next < 0 || next >= len(s) || !wordByte(s[next])
	}
	return true
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// weakLen is the length under which a secret is weak: besides being easy to guess, it is
// likely to stand in ordinary text, which is then masked too.
const weakLen = 8

// ownWords are words the sidecar's own messages use: a secret equal to one masks them.
var ownWords = []string{"admin", "backend", "certificate", "certificates", "config", "configmap", "default",
	"error", "frontend", "haproxy", "ingress", "keys", "live", "password", "pod", "reload", "secret",
	"server", "service", "services", "stats", "template", "validate"}

// Weak says why a secret value would mask ordinary text as well ("" when it would not): it is
// shorter than 8 characters, or a word the sidecar's own messages use (masked wherever it
// stands as a word of its own, though not inside a path or a name).
func Weak(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) < weakLen:
		return "it is shorter than 8 characters"
	case slices.Contains(ownWords, strings.ToLower(v)):
		return "it is a word the sidecar's own messages use"
	}
	return ""
}

// Error is err with its message redacted (nil stays nil). errors.Is/As still see the original.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// KeyLines returns the base64 lines of the private keys in pem (at least 16 characters
// each), to register as secrets: a line quoted on its own, outside its PEM block, is still
// key material.
func KeyLines(pem []byte) []string {
	var out []string
	for _, m := range privateKeyBlock.FindAll(pem, -1) {
		for _, line := range strings.Split(string(m), "\n") {
			line = strings.TrimSpace(line)
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
				out = append(out, line)
			}
		}
	}
	return out
}

// Handler wraps h so that every record's message and attribute values are redacted.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &handler{r: r, next: h} }

type handler struct {
	r    *Redactor
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &handler{r: h.r, next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, next: h.next.WithGroup(name)}
}

// attr redacts an attribute's value as it will be printed: strings, errors and anything
// with a String or Error method.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = h.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.String(x.String()))
		case []byte:
			return slog.String(a.Key, h.r.String(string(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
