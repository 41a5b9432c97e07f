package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sigyaml "sigs.k8s.io/yaml"
)

// releaseFiles are the files that name the release version, relative to the repository: what
// make set-version writes, and what it reads (the Makefile, hack/version.sh).
var releaseFiles = []string{"VERSION", "Makefile", "hack/version.sh", "charts/haproxy-sidecar/Chart.yaml",
	"examples/kubernetes/deployment.yaml", "docs/kubernetes.md"}

// makeVars runs make in dir with the variables the Makefile takes from the environment unset,
// so that the test sees its own defaults.
func makeVars(dir string, args ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "VERSION", "REVISION", "IMAGE", "IMAGE_REPOSITORY", "DOCKER", "MAKEFLAGS":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("make %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// versionDisagreements lists each place under root that names another version than its VERSION
// file: the chart (version, appVersion: the default image tag), the example Deployment's
// images, the docs' examples, what make version prints and what make image builds and tags.
func versionDisagreements(t *testing.T, root string) (version string, bad []string) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	version = strings.TrimSpace(read("VERSION"))
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		t.Fatalf("VERSION %q is not a semantic version", version)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := sigyaml.Unmarshal([]byte(read("charts/haproxy-sidecar/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != version || chart.AppVersion != version {
		bad = append(bad, fmt.Sprintf("Chart.yaml: version %q, appVersion %q", chart.Version, chart.AppVersion))
	}
	images := regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`).FindAllStringSubmatch(read("examples/kubernetes/deployment.yaml"), -1)
	if len(images) != 2 {
		bad = append(bad, fmt.Sprintf("examples/kubernetes/deployment.yaml has %d images, want HAProxy's and the sidecar's", len(images)))
	}
	for _, m := range images {
		if m[1] != "haproxy-sidecar:"+version {
			bad = append(bad, "examples/kubernetes/deployment.yaml runs "+m[1])
		}
	}
	docs := regexp.MustCompile(`(?:haproxy-sidecar:|VERSION=)([0-9][0-9A-Za-z.+-]*)`).FindAllStringSubmatch(read("docs/kubernetes.md"), -1)
	if len(docs) == 0 {
		bad = append(bad, "docs/kubernetes.md names no version")
	}
	for _, m := range docs {
		if m[1] != version {
			bad = append(bad, "docs/kubernetes.md says "+m[0])
		}
	}
	if out, err := makeVars(root, "version"); err != nil || strings.TrimSpace(out) != version {
		bad = append(bad, fmt.Sprintf("make version: %q %v", out, err))
	}
	// DOCKER=echo: the recipe runs as it would, printing the build instead of running it.
	out, err := makeVars(root, "image", "DOCKER=echo")
	switch {
	case err != nil:
		bad = append(bad, err.Error())
	case !strings.Contains(out, " -t haproxy-sidecar:"+version+" "):
		bad = append(bad, "make image tags another image: "+out)
	case !strings.Contains(out, " --build-arg VERSION="+version+" "):
		bad = append(bad, "make image stamps another version: "+out)
	}
	return version, bad
}

// TestOneImageTag: the release version has one place, the VERSION file. make image builds and
// tags haproxy-sidecar:VERSION; the chart's default image, the example Deployment and the docs
// name that same image, so that `helm install` and `kubectl apply` pull what was built; make
// set-version keeps them so.
func TestOneImageTag(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found")
	}
	version, bad := versionDisagreements(t, "..")
	for _, b := range bad {
		t.Errorf("%s; VERSION says %s (make set-version V=%s)", b, version, version)
	}

	t.Run("the chart's default image", func(t *testing.T) {
		spec := podSpec(t, helmTemplate(t, helmBin(t), "lb", "lb"))
		for _, name := range []string{"haproxy", "sidecar"} {
			if img := container(t, spec, name)["image"]; img != "haproxy-sidecar:"+version {
				t.Errorf("the chart's %s container runs %v, want haproxy-sidecar:%s", name, img, version)
			}
		}
	})
	t.Run("make set-version", func(t *testing.T) {
		root := t.TempDir()
		for _, name := range releaseFiles {
			b, err := os.ReadFile(filepath.Join("..", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, name), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := makeVars(root, "set-version", "V=9.8.7-rc.1"); err != nil {
			t.Fatal(err)
		}
		got, bad := versionDisagreements(t, root)
		if got != "9.8.7-rc.1" {
			t.Errorf("VERSION %q after make set-version V=9.8.7-rc.1", got)
		}
		for _, b := range bad {
			t.Errorf("after make set-version: %s", b)
		}
	})
}
