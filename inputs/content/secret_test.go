package content

import (
	"strings"
	"testing"
)

func TestQuoteWithholdsSecretLines(t *testing.T) {
	s := SecretLines{ConfigName: {3}}
	cfg := []byte("global\n  maxconn 10\n  stats auth stats:ssap-terc3s\nend")
	for line, want := range map[int]string{1: "global", 2: "maxconn 10", 3: Withheld, 4: "end", 5: "", 0: ""} {
		if got := s.Quote(ConfigName, cfg, line); got != want {
			t.Errorf("line %d: %q, want %q", line, got, want)
		}
	}
	if got := (SecretLines)(nil).Quote(ConfigName, cfg, 3); got != "stats auth stats:ssap-terc3s" {
		t.Errorf("without secrets: %q", got)
	}
}

// TestWithholdHAProxysWords: HAProxy's alerts about a line holding a secret lose what follows
// the position (and their continuation lines); others stay as they are.
func TestWithholdHAProxysWords(t *testing.T) {
	s := SecretLines{ConfigName: {12}, "maps/hosts.map": {2}}
	out := strings.Join([]string{
		"[NOTICE]   (1) : haproxy version is 3.2.1",
		"[ALERT]    (1) : config : parsing [/tmp/stage/check.cfg:12] : unknown keyword 'ssap-terc3s' in 'listen' section",
		"   | did you mean 'ssap-terc3' maybe ?",
		"[ALERT]    (1) : config : parsing [/tmp/stage/check.cfg:13] : unknown keyword 'bogus' in 'listen' section",
		"[ALERT]    (1) : config : proxy 'web': unable to load map '/etc/haproxy/maps/hosts.map' line 2: 'ssap x'",
		"[ALERT]    (1) : config : Error(s) found in configuration file : /tmp/stage/check.cfg",
	}, "\n")
	got := s.Withhold(out)
	for _, leak := range []string{"ssap"} {
		if strings.Contains(got, leak) {
			t.Errorf("withheld output still says %q:\n%s", leak, got)
		}
	}
	for _, keep := range []string{
		"config : parsing [/tmp/stage/check.cfg:12] " + WithheldWords,
		"unknown keyword 'bogus' in 'listen' section", "haproxy version is 3.2.1", "Error(s) found in configuration file",
		"config : proxy 'web': unable to load map '/etc/haproxy " + WithheldWords,
	} {
		if !strings.Contains(got, keep) {
			t.Errorf("withheld output lost %q:\n%s", keep, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 4 {
		t.Errorf("%d lines, want 5 (the continuation dropped):\n%s", n+1, got)
	}
	if got := (SecretLines{}).Withhold(out); got != out {
		t.Errorf("without secret lines the output changed:\n%s", got)
	}
}
