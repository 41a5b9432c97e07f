package sidecar

import (
	"runtime"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	b := Build()
	if b.Version != Version || b.GoVersion != runtime.Version() || b.Revision == "" {
		t.Errorf("Build() = %+v", b)
	}
	if s := b.String(); !strings.HasPrefix(s, Version+" (revision ") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}
