package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// dockerfile is the Dockerfile as BuildKit reads it: its stages, and the defaults of the ARGs
// before the first FROM (what a FROM's ${NAME} stands for without --build-arg).
type dockerfile struct {
	stages   []instructions.Stage
	metaArgs map[string]string
}

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse the Dockerfile: %v", err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("read the Dockerfile's instructions: %v", err)
	}
	d := dockerfile{stages: stages, metaArgs: map[string]string{}}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			d.metaArgs[kv.Key] = kv.ValueString()
		}
	}
	return d
}

// image is a stage's base image with the meta ARGs' defaults in place.
func (d dockerfile) image(s instructions.Stage) string {
	return regexp.MustCompile(`\$\{?(\w+)\}?`).ReplaceAllStringFunc(s.BaseName, func(v string) string {
		return d.metaArgs[strings.Trim(v, "${}")]
	})
}

// commands returns the commands of type T in stage s.
func commands[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if x, ok := c.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// TestDockerfile checks what can be checked of the image without building it (no container
// engine here): every base image pinned to a release, Go's the one go.mod names and HAProxy's
// the branch the tests run everything against; the stop signal one the sidecar handles; a
// non-root user; an exec-form entrypoint; the binary's version from the VERSION file (the
// image's tag: TestOneImageTag).
func TestDockerfile(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("%d stages, want the build and the image", len(d.stages))
	}
	names := map[string]bool{}
	for _, s := range d.stages {
		names[s.Name] = true
	}
	pinned := regexp.MustCompile(`^[\w./-]+:v?\d+\.\d+\.\d+([-.\w]*)?(@sha256:[0-9a-f]{64})?$|^[\w./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$`)
	for _, s := range d.stages {
		if names[s.BaseName] {
			continue // FROM an earlier stage
		}
		if img := d.image(s); !pinned.MatchString(img) {
			t.Errorf("FROM %s (%s): not pinned to a release (NAME:X.Y.Z or a digest)", s.BaseName, img)
		}
	}

	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := "(none)"
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b); m != nil {
		goVersion = string(m[1])
	}
	build := d.stages[0]
	if !strings.HasPrefix(d.image(build), "golang:"+goVersion+"-") {
		t.Errorf("the build stage is FROM %s; go.mod says go %s", d.image(build), goVersion)
	}
	script, err := os.ReadFile("../hack/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	branch := "(none)"
	if m := regexp.MustCompile(`HAPROXY_TEST_VERSIONS:-(\d+\.\d+)`).FindSubmatch(script); m != nil {
		branch = string(m[1])
	}
	final := d.stages[len(d.stages)-1]
	if !strings.HasPrefix(d.image(final), "haproxy:"+branch+".") {
		t.Errorf("the image is FROM %s; hack/test.sh runs every test against HAProxy %s", d.image(final), branch)
	}

	t.Run("the stop signal is one the sidecar stops on", func(t *testing.T) {
		stops := commands[*instructions.StopSignalCommand](final)
		if len(stops) == 0 {
			t.Fatal("no STOPSIGNAL: the image would keep HAProxy's SIGUSR1")
		}
		sig := stops[len(stops)-1].Signal
		if sig != "SIGTERM" {
			t.Errorf("STOPSIGNAL %s, want SIGTERM (the entrypoint is the sidecar)", sig)
		}
		src, err := os.ReadFile("../signals_unix.go")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "syscall."+sig) {
			t.Errorf("the sidecar does not stop on %s (signals_unix.go)", sig)
		}
	})
	t.Run("a non-root user", func(t *testing.T) {
		users := commands[*instructions.UserCommand](final)
		if len(users) == 0 {
			t.Fatal("no USER: the image runs as root")
		}
		if u := strings.Split(users[len(users)-1].User, ":")[0]; u == "root" || u == "0" || u == "" {
			t.Errorf("USER %s", users[len(users)-1].User)
		}
	})
	t.Run("exec-form entrypoint and command", func(t *testing.T) {
		eps, cmds := commands[*instructions.EntrypointCommand](final), commands[*instructions.CmdCommand](final)
		if len(eps) != 1 || eps[0].PrependShell || strings.Join(eps[0].CmdLine, " ") != "/usr/local/bin/haproxy-sidecar" {
			t.Errorf("ENTRYPOINT %v: want [\"/usr/local/bin/haproxy-sidecar\"] (exec form: the sidecar gets the signals, not a shell)", eps)
		}
		for _, c := range cmds {
			if c.PrependShell {
				t.Errorf("CMD %v in shell form", c.CmdLine)
			}
		}
	})
	t.Run("the version comes from the VERSION file", func(t *testing.T) {
		var args []string
		for _, a := range commands[*instructions.ArgCommand](build) {
			for _, kv := range a.Args {
				args = append(args, kv.Key)
			}
		}
		var ldflags string
		for _, r := range commands[*instructions.RunCommand](build) {
			if line := strings.Join(r.CmdLine, " "); strings.Contains(line, "go build") {
				ldflags = line
			}
		}
		m := regexp.MustCompile(`-X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=\$\{?(\w+)`).FindStringSubmatch(ldflags)
		if m == nil {
			t.Fatalf("the go build sets no sidecar.Version: %q", ldflags)
		}
		// The variable is ${VERSION} (the build argument make image passes: the VERSION file),
		// else the VERSION file itself.
		if m[1] != "VERSION" && !regexp.MustCompile(m[1]+`="\$\{VERSION:-\$\(cat VERSION`).MatchString(ldflags) {
			t.Errorf("sidecar.Version=$%s: neither the VERSION build argument nor the VERSION file: %q", m[1], ldflags)
		}
		if !strings.Contains(strings.Join(args, " "), "VERSION") {
			t.Errorf("the build stage declares ARGs %v, not VERSION", args)
		}
	})
}
