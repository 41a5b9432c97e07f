package main

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
		o, err := parseOptions("run", []string{"--watch", "ingresses.v1.networking.k8s.io;selector=team=a,tier!=db", "--watch", "nodes.v1"},
			"", env("services.v1"), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(o.watch.Names(), " "); got != "ingresses nodes" {
			t.Errorf("resources %q: the command line wins over WATCH", got)
		}
		if o.watch[0].Selector != "team=a,tier!=db" {
			t.Errorf("selector %q", o.watch[0].Selector)
		}
		bo, err := o.buildOptions()
		if err != nil || len(bo.Resources) != 2 {
			t.Errorf("the snapshot options do not have the resources: %v %v", bo.Resources, err)
		}
	})
	t.Run("comma-separated in the environment", func(t *testing.T) {
		o, err := parseOptions("render", nil, "", env("ingresses.v1.networking.k8s.io;selector=a=b,c=d, endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name,nodes.v1"), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(o.watch.Names(), " "); got != "ingresses endpointslices nodes" {
			t.Errorf("resources %q", got)
		}
		if o.watch[0].Selector != "a=b,c=d" || o.watch[1].Indexes[0].Name != "service" {
			t.Errorf("options lost: %v", o.watch.String())
		}
	})
	t.Run("a bad value names the variable and the reason", func(t *testing.T) {
		_, err := parseOptions("run", nil, "", env("ingresses.networking.k8s.io"), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "$WATCH") || !strings.Contains(err.Error(), "not an API version") {
			t.Errorf("err = %v", err)
		}
		_, err = parseOptions("run", []string{"--watch", "events.v1", "--watch", "events.v1.events.k8s.io"}, "", env(""), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), ";as=NAME") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("help explains it", func(t *testing.T) {
		var out bytes.Buffer
		_, _ = parseOptions("run", []string{"--help"}, "", env(""), &out)
		for _, want := range []string{"--watch RESOURCE[;OPTION...]   [$WATCH]", "ingresses.v1.networking.k8s.io", "selector=SELECTOR",
			"index=[NAME=]label:KEY", "resources.PLURAL.by_name", "get, list and watch"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--help does not say %q", want)
			}
		}
	})
}
