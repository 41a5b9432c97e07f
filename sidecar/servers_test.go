package sidecar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

// passes is a haproxy -c that accepts everything, with a warning.
type passes struct{}

func (passes) Check(context.Context, string) error { return nil }
func (passes) CheckWarnings(context.Context, string) ([]string, error) {
	return []string{"a warning"}, nil
}

func TestServersCheckerRefusesWhatTheModelCannotHold(t *testing.T) {
	write := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := serversChecker{haproxy: passes{}, backends: []string{"be"}}
	warnings, err := c.CheckWarnings(t.Context(), write(t, "backend be\n  server s1 10.0.0.1:80 check\nbackend other\n  server s2 10.0.0.2:80 source 10.0.0.9\n"))
	if err != nil || len(warnings) != 1 {
		t.Errorf("a backend not managed is not checked: %v, %v", warnings, err)
	}
	err = c.Check(t.Context(), write(t, "backend be\n  server s1 10.0.0.1:80 check source 10.0.0.9\n"))
	var ce *validate.CheckError
	if !errors.As(err, &ce) || ce.Line != 2 || !strings.Contains(ce.Error(), `backend be, server s1: "source" has no field`) {
		t.Errorf("err = %#v, want a CheckError at line 2 naming the server and the keyword", err)
	}
	if err := c.Check(t.Context(), write(t, "backend other\n")); err == nil || !strings.Contains(err.Error(), "no backend be") {
		t.Errorf("err = %v, want the missing backend named", err)
	}
}
