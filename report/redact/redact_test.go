package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	var r Redactor
	r.Set("stats", "s3cret-pass")
	r.Set("dataplane", "tk-91x", "hunter2hunter2")
	r.Set("short", "ab") // too short to redact: it would mask every "ab"
	for _, tc := range []struct{ in, want string }{
		{`stats auth stats:s3cret-pass`, `stats auth stats:[REDACTED]`},
		{`token tk-91x and hunter2hunter2`, `token [REDACTED] and [REDACTED]`},
		{`about the cabin`, `about the cabin`},
		{"key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----\nafter", "key:\n[REDACTED]\nafter"},
		{"cut -----BEGIN RSA PRIVATE KEY-----\nMIIEvQ", "cut [REDACTED]"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSetReplacesGroup(t *testing.T) {
	var r Redactor
	r.Set("stats", "old-password")
	r.Set("stats", "new-password")
	if got := r.String("old-password new-password"); got != "old-password [REDACTED]" {
		t.Errorf("after rotation: %q", got)
	}
	r.Set("stats")
	if got := r.String("new-password"); got != "new-password" {
		t.Errorf("after removal: %q", got)
	}
}

func TestLongestFirst(t *testing.T) {
	var r Redactor
	r.Set("a", "pass")
	r.Set("b", "password123")
	if got := r.String("password123"); got != Mask {
		t.Errorf("got %q, want the longer secret masked whole", got)
	}
}

func TestNilRedactsKeys(t *testing.T) {
	var r *Redactor
	if got := r.String("x -----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----"); got != "x "+Mask {
		t.Errorf("got %q", got)
	}
}

func TestError(t *testing.T) {
	var r Redactor
	r.Set("stats", "s3cret-pass")
	base := errors.New("rendered line 3: stats auth stats:s3cret-pass")
	err := r.Error(fmt.Errorf("validate: %w", base))
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error not redacted: %v", err)
	}
	if !errors.Is(err, base) {
		t.Error("errors.Is no longer finds the original")
	}
	if r.Error(nil) != nil {
		t.Error("nil error became non-nil")
	}
}

func TestKeyLines(t *testing.T) {
	pem := "-----BEGIN CERTIFICATE-----\nMIIBCERTLINEAAAAAAAAAAA\n-----END CERTIFICATE-----\n" +
		"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nshort\n-----END PRIVATE KEY-----\n"
	got := KeyLines([]byte(pem))
	if len(got) != 1 || got[0] != "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" {
		t.Errorf("KeyLines = %q", got)
	}
}

func TestHandler(t *testing.T) {
	var r Redactor
	r.Set("stats", "s3cret-pass")
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil))).With("cfg", "stats:s3cret-pass")
	log.Info("saw s3cret-pass", "error", errors.New("bad s3cret-pass"), "line", []byte("s3cret-pass"),
		slog.Group("g", "v", "s3cret-pass"), "n", 3)
	out := buf.String()
	if strings.Contains(out, "s3cret") {
		t.Errorf("log leaks the secret: %s", out)
	}
	if strings.Count(out, Mask) != 5 || !strings.Contains(out, "n=3") {
		t.Errorf("log: %s", out)
	}
}

// TestAnyCase: a secret printed upper- or lower-cased (HAProxy's messages, a template's
// |upper) is masked too.
func TestAnyCase(t *testing.T) {
	r := &Redactor{}
	r.Set("stats", "S3cret-Pass")
	for _, s := range []string{"auth stats:S3cret-Pass", "AUTH STATS:S3CRET-PASS", "auth stats:s3cret-pass"} {
		if got := r.String(s); strings.Contains(strings.ToLower(got), "s3cret-pass") || !strings.Contains(got, Mask) {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
}

func TestWeak(t *testing.T) {
	for v, weak := range map[string]bool{"": false, "config": true, "abc1234": true, "services": true, "Template": true,
		"x7!Kq9#2mW": false, "correct-horse-battery": false} {
		if got := Weak(v) != ""; got != weak {
			t.Errorf("Weak(%q) = %q", v, Weak(v))
		}
	}
}

// TestSecretMaskedAsATokenOnly: a secret equal to a common word is masked where it stands on
// its own (after "stats:", quoted, as a word), never inside a path, a file name, a host name or
// a dashed name, which messages must show as they are.
func TestSecretMaskedAsATokenOnly(t *testing.T) {
	var r Redactor
	r.Set("stats", "services")
	r.Set("env", "k3y:v4l")
	for in, want := range map[string]string{
		"examples/local/services.yaml:12:3: decode: bad": "examples/local/services.yaml:12:3: decode: bad",
		"ConfigMap lb/services key web":                  "ConfigMap lb/services key web",
		"server web.services.svc.cluster.local:80":       "server web.services.svc.cluster.local:80",
		"pod my-services-7f9 and services-v2":            "pod my-services-7f9 and services-v2",
		"/etc/services and services.json":                "/etc/services and services.json",
		"SERVICESX xservices services_1":                 "SERVICESX xservices services_1",
		"stats auth stats:services":                      "stats auth stats:" + Mask,
		`{"password": "Services"}`:                       `{"password": "` + Mask + `"}`,
		"the password is services.":                      "the password is " + Mask + ".",
		"user:services@host/path services":               "user:" + Mask + "@host/path " + Mask,
		"k3y:v4l, k3y:v4l-x k3y:v4l/y":                   Mask + ", k3y:v4l-x k3y:v4l/y",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	// A shorter secret standing alone where a longer one found first does not.
	var r2 Redactor
	r2.Set("a", "pass1234", "pass1234-extra")
	if got := r2.String("x pass1234-extras pass1234-extra"); got != "x pass1234-extras "+Mask {
		t.Errorf("got %q", got)
	}
}
