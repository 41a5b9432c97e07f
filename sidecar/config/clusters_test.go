package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

func TestParseCluster(t *testing.T) {
	for in, want := range map[string]Cluster{
		"east=/k/east.yaml":                {Name: "east", Kubeconfig: "/k/east.yaml"},
		"west=/k/all.yaml:west-ctx":        {Name: "west", Kubeconfig: "/k/all.yaml", Context: "west-ctx"},
		"eks=:arn:aws:eks:eu-west-1:1:c/x": {Name: "eks", Context: "arn:aws:eks:eu-west-1:1:c/x"},
		" b = /k/b.yaml ":                  {Name: "b", Kubeconfig: "/k/b.yaml"},
	} {
		got, err := ParseCluster(in)
		if err != nil || got != want {
			t.Errorf("ParseCluster(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"east", "East=/k", "a/b=/k", "east="} {
		if _, err := ParseCluster(in); err == nil {
			t.Errorf("ParseCluster(%q): no error", in)
		}
	}
}

func TestClusterFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clusters")
	if err := os.WriteFile(file, []byte("# more\n\nnorth=/k/n.yaml:n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ParseRun([]string{"--source=kube", "--cluster", "east=/k/e.yaml", "--cluster", "west=/k/w.yaml:w,south=:s",
		"--clusters-file", file, "--cluster-name", "home", "--cluster-forget-after", "1m", "--cluster-read-wait", "500ms"}, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Source.Kube.Members()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "east=/k/e.yaml,west=/k/w.yaml:w,south=:s,north=/k/n.yaml:n" {
		t.Errorf("members %s", got)
	}
	if !r.Source.Kube.MultiCluster() || r.Source.Kube.ClusterName != "home" || r.Source.Kube.ForgetAfter.Minutes() != 1 ||
		r.Source.Kube.ReadWait != 500*time.Millisecond {
		t.Errorf("kube config %+v", r.Source.Kube)
	}
	// One cluster: nothing of the above.
	r, err = ParseRun([]string{"--source=kube"}, "", func(string) string { return "" }, io.Discard)
	if err != nil || r.Source.Kube.MultiCluster() {
		t.Errorf("without --cluster: multi %v, err %v", r != nil && r.Source.Kube.MultiCluster(), err)
	}
	if r != nil && r.Source.Kube.ReadWait != watcher.DefaultMemberReadWait {
		t.Errorf("--cluster-read-wait defaults to %v, want %v", r.Source.Kube.ReadWait, watcher.DefaultMemberReadWait)
	}
	for args, want := range map[string]string{
		"--source=file --dir=/x --cluster=a=/k":                   "need --source=kube",
		"--source=kube --cluster=local=/k":                        "named twice",
		"--source=kube --cluster=a=/k --cluster-name=Bad":         "--cluster-name",
		"--source=kube --cluster=a=/k --cluster-forget-after=-1s": "--cluster-forget-after",
		"--source=kube --cluster=a=/k --cluster-read-wait=0s":     "--cluster-read-wait",
		"--source=kube --cluster=a=/k --cluster-read-wait=-1s":    "--cluster-read-wait",
	} {
		r, err := ParseRun(strings.Fields(args), "", func(string) string { return "" }, io.Discard)
		if err == nil {
			err = r.Validate()
		}
		if err == nil {
			_, err = r.Source.Kube.Members()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", args, err, want)
		}
	}
}
