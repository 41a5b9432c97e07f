package config

import (
	"io"
	"strings"
	"testing"
)

func TestPeersFlags(t *testing.T) {
	env := envOf(map[string]string{"POD_NAME": "haproxy-7c9-x2", "POD_NAMESPACE": "edge", "HAPROXY_SIDECAR_PEERS": "true"})
	r, err := ParseRun([]string{"--source=kube"}, "", env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if !r.Peers.On() || r.Peers.Name != "haproxy-7c9-x2" || r.Peers.Namespace != "edge" || r.Peers.Port != 10000 {
		t.Errorf("peers from the downward API: %+v", r.Peers)
	}
	given, err := ParseRun([]string{"--source=kube", "--peer-name=a", "--peers-namespace=b", "--peers-selector=app=lb"}, "", env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if given.Peers.Name != "a" || given.Peers.Namespace != "b" || !given.Peers.On() {
		t.Errorf("flags given lose to the environment: %+v", given.Peers)
	}
	off, err := ParseRun([]string{"--source=file", "--dir=x"}, "", envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if off.Peers.On() {
		t.Errorf("peers on without --peers: %+v", off.Peers)
	}
	etcd, err := ParseRun([]string{"--source=etcd", "--etcd-endpoints=http://e:2379", "--peers"}, "", envOf(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := etcd.Validate(); err != nil {
		t.Errorf("--peers with --source=etcd and no selector: %v (etcd reads the pod's labels)", err)
	}
	for args, want := range map[string]string{
		"--source=file --dir=x --peers":                "needs --peers-selector",
		"--source=file --dir=x --peers-selector=a=b,,": "--peers-selector",
		"--source=kube --peers --peers-port=0":         "--peers-port 0",
	} {
		r, err := ParseRun(strings.Fields(args), "", envOf(nil), io.Discard)
		if err == nil {
			err = r.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", args, err, want)
		}
	}
}
