package sidecar

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// TestPasswordThatIsAFileName: a stats password equal to a file's name leaves the paths in
// messages whole (it is masked where it stands on its own), and validate warns about it as run
// does.
func TestPasswordThatIsAFileName(t *testing.T) {
	dir := example(t)
	edit(t, filepath.Join(dir, "services.yaml"), `"selector": {"app": "web"},`, `"selector": {"app": "web"}`)
	cfg, err := config.ParseOnce("validate", []string{"--dir", dir, "--validate=false", "--statistics-password", "services"}, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	err = Once(context.Background(), cfg, io.Discard, Env{Log: &log})
	if err == nil {
		t.Fatal("validate passed")
	}
	if path := filepath.Join(dir, "services.yaml") + ":"; !strings.Contains(err.Error(), path) {
		t.Errorf("the error does not name %s whole:\n%v", path, err)
	}
	if strings.Contains(err.Error(), "[REDACTED].yaml") {
		t.Errorf("the path is mangled:\n%v", err)
	}
	if !strings.Contains(log.String(), "a secret would mask ordinary text") || !strings.Contains(log.String(), "--statistics-password") {
		t.Errorf("validate does not warn about the password:\n%s", log.String())
	}
}
