package e2e

import (
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// chartSidecarConfig parses the chart's sidecar container as the sidecar would (its args after `run`, its
// environment), and validates the result: a flag the chart misspells, or a value the sidecar
// refuses, fails here.
func chartSidecarConfig(t *testing.T, side map[string]any) *config.Run {
	t.Helper()
	args, _ := side["args"].([]any)
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("sidecar args %v: want run first", args)
	}
	var flags []string
	for _, a := range args[1:] {
		flags = append(flags, a.(string))
	}
	env := envOf(side)
	cfg, err := config.ParseRun(flags, "", func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("the sidecar refuses the chart's flags: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the sidecar refuses the chart's configuration: %v", err)
	}
	return cfg
}

// TestChartClusters: clusters.members mounts each member's kubeconfig Secret read-only in the
// sidecar (not in HAProxy) and names each file, with its context, in --cluster, with
// --cluster-name, --cluster-forget-after and --cluster-read-wait, as the sidecar's own flag parser reads them; no
// members, none of it. Names that clash are refused at render.
func TestChartClusters(t *testing.T) {
	helm := helmBin(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`clusters:
  name: east
  forgetAfter: 5m
  readWait: 1500ms
  members:
  - {name: west, secret: west-kubeconfig}
  - {name: south, secret: all-clusters, key: config, context: "arn:aws:eks:eu-west-1:1:cluster/south"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, helm, "lint", "--strict", chartDir, "-f", values)
	spec := podSpec(t, helmTemplate(t, helm, "lb", "lb", "-f", values))
	side, hap := container(t, spec, "sidecar"), container(t, spec, "haproxy")

	// volume name -> Secret, and the sidecar's mount path -> volume name.
	secrets := map[string]string{}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		m := v.(map[string]any)
		if name := m["name"].(string); strings.HasPrefix(name, "cluster-") {
			s, _ := nested(m, "secret", "secretName").(string)
			secrets[name] = s
		}
	}
	if len(secrets) != 2 || secrets["cluster-west"] != "west-kubeconfig" || secrets["cluster-south"] != "all-clusters" {
		t.Errorf("cluster volumes %v: want cluster-west of west-kubeconfig, cluster-south of all-clusters", secrets)
	}
	mounts := map[string]string{}
	list, _ := side["volumeMounts"].([]any)
	for _, v := range list {
		m := v.(map[string]any)
		if name := m["name"].(string); strings.HasPrefix(name, "cluster-") {
			if m["readOnly"] != true {
				t.Errorf("%s mounted writable", name)
			}
			mounts[m["mountPath"].(string)] = name
		}
	}
	if len(mounts) != 2 {
		t.Errorf("the sidecar's cluster mounts %v: want one per member", mounts)
	}
	if js := toJSON(t, hap["volumeMounts"]); strings.Contains(js, "cluster-") {
		t.Errorf("HAProxy mounts the kubeconfigs: %s", js)
	}

	// What the sidecar reads: each member's file is its key in its own Secret's mount.
	kube := chartSidecarConfig(t, side).Source.Kube
	if kube.ClusterName != "east" || kube.ForgetAfter != 5*time.Minute || kube.ReadWait != 1500*time.Millisecond || !kube.MultiCluster() {
		t.Errorf("--cluster-name %q, --cluster-forget-after %v, --cluster-read-wait %v, several clusters %v",
			kube.ClusterName, kube.ForgetAfter, kube.ReadWait, kube.MultiCluster())
	}
	members, err := kube.Members()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, secret, key, context string }{
		{"west", "west-kubeconfig", "kubeconfig", ""},
		{"south", "all-clusters", "config", "arn:aws:eks:eu-west-1:1:cluster/south"},
	}
	if len(members) != len(want) {
		t.Fatalf("--cluster %v: want %d members", members, len(want))
	}
	for i, w := range want {
		c := members[i]
		dir, key := path.Split(c.Kubeconfig)
		vol := mounts[strings.TrimSuffix(dir, "/")]
		if c.Name != w.name || secrets[vol] != w.secret || key != w.key || c.Context != w.context {
			t.Errorf("--cluster %s: file %s (in volume %q of Secret %q), context %q; want key %s of Secret %s, context %q",
				c.Name, c.Kubeconfig, vol, secrets[vol], c.Context, w.key, w.secret, w.context)
		}
	}

	t.Run("no members: none of it", func(t *testing.T) {
		for _, args := range [][]string{nil, {"--set", "clusters.name=east,clusters.forgetAfter=5m"}} {
			spec := podSpec(t, helmTemplate(t, helm, "lb", "lb", args...))
			if js := toJSON(t, spec); strings.Contains(js, "cluster-") || strings.Contains(js, "CLUSTER") || strings.Contains(js, "/clusters") {
				t.Errorf("%v: the pod has cluster volumes, mounts or flags: %s", args, js)
			}
			if k := chartSidecarConfig(t, container(t, spec, "sidecar")).Source.Kube; k.MultiCluster() {
				t.Errorf("%v: the sidecar follows several clusters", args)
			}
		}
	})
	t.Run("clashing names refused", func(t *testing.T) {
		for _, set := range []string{
			`{"members":[{"name":"west","secret":"a"},{"name":"west","secret":"b"}]}`,
			`{"name":"west","members":[{"name":"west","secret":"a"}]}`,
		} {
			out, err := exec.Command(helm, "template", "lb", chartDir, "--set-json", "clusters="+set).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "must differ") {
				t.Errorf("clusters=%s: %v\n%s", set, err, out)
			}
		}
		for set, msg := range map[string]string{
			`{"members":[{"name":"West","secret":"a"}]}`:                 "does not match pattern",
			`{"members":[{"name":"west"}]}`:                              "missing property 'secret'",
			`{"members":[{"name":"west","secret":"a","context":"x,y"}]}`: "does not match pattern",
			`{"forgetAfter":"five minutes"}`:                             "does not match pattern",
			`{"readWait":"0"}`:                                           "does not match pattern",
		} {
			out, err := exec.Command(helm, "template", "lb", chartDir, "--set-json", "clusters="+set).CombinedOutput()
			if err == nil || !strings.Contains(string(out), msg) {
				t.Errorf("clusters=%s: %v\n%s", set, err, out)
			}
		}
	})
}
