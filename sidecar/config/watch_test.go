package config

import (
	"bytes"
	"strings"
	"testing"
)

func TestWatchFlag(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "WATCH" {
				return v
			}
			return ""
		}
	}
	t.Run("repeated on the command line", func(t *testing.T) {
		o, err := ParseRun([]string{"--watch", "ingresses.v1.networking.k8s.io;selector=team=a,tier!=db", "--watch", "nodes.v1"},
			"", env("services.v1"), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(o.Inputs.Watch.Names(), " "); got != "ingresses nodes" {
			t.Errorf("resources %q: the command line wins over WATCH", got)
		}
		if o.Inputs.Watch[0].Selector != "team=a,tier!=db" {
			t.Errorf("selector %q", o.Inputs.Watch[0].Selector)
		}
	})
	t.Run("comma-separated in the environment", func(t *testing.T) {
		o, err := ParseOnce("render", nil, "", env("ingresses.v1.networking.k8s.io;selector=a=b,c=d, endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name,nodes.v1"), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(o.Inputs.Watch.Names(), " "); got != "ingresses endpointslices nodes" {
			t.Errorf("resources %q", got)
		}
		if o.Inputs.Watch[0].Selector != "a=b,c=d" || o.Inputs.Watch[1].Indexes[0].Name != "service" {
			t.Errorf("options lost: %v", o.Inputs.Watch.String())
		}
	})
	t.Run("a bad value names the variable and the reason", func(t *testing.T) {
		_, err := ParseRun(nil, "", env("ingresses.networking.k8s.io"), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "$WATCH") || !strings.Contains(err.Error(), "not an API version") {
			t.Errorf("err = %v", err)
		}
		_, err = ParseRun([]string{"--watch", "events.v1", "--watch", "events.v1.events.k8s.io"}, "", env(""), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), ";as=NAME") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("help explains it", func(t *testing.T) {
		var out bytes.Buffer
		_, _ = ParseRun([]string{"--help"}, "", env(""), &out)
		for _, want := range []string{"--watch RESOURCE[;OPTION...]   [$HAPROXY_SIDECAR_WATCH]", "ingresses.v1.networking.k8s.io", "selector=SELECTOR",
			"index=[NAME=]label:KEY", "resources.PLURAL.by_name", "get, list and watch"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--help does not say %q", want)
			}
		}
	})
}
