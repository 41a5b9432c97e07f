package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"

	sigyaml "sigs.k8s.io/yaml"
)

// TestChartVersionIsVERSION: the release version has one place, the VERSION file (make
// set-version writes it and copies it): the chart's version and appVersion (the default image
// tag) and the example Deployment's images are that version.
func TestChartVersionIsVERSION(t *testing.T) {
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		t.Fatalf("VERSION %q is not a semantic version", version)
	}
	b, err = os.ReadFile("../charts/haproxy-sidecar/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := sigyaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != version || chart.AppVersion != version {
		t.Errorf("Chart.yaml version %q, appVersion %q; VERSION says %q (make set-version V=%s)", chart.Version, chart.AppVersion, version, version)
	}
	b, err = os.ReadFile("../examples/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`).FindAllStringSubmatch(string(b), -1)
	if len(images) != 2 {
		t.Fatalf("examples/kubernetes/deployment.yaml has %d images, want HAProxy's and the sidecar's", len(images))
	}
	for _, m := range images {
		if m[1] != "haproxy-sidecar:"+version {
			t.Errorf("examples/kubernetes/deployment.yaml runs %s, want haproxy-sidecar:%s (the one image: the HAProxy that validates serves)", m[1], version)
		}
	}
}
