// Package deps pins modules the packages under construction need, so that go.mod is stable
// while they are written. Remove once each module is imported by real code.
package deps

import (
	_ "github.com/flosch/pongo2/v6"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/labels"
	_ "k8s.io/apimachinery/pkg/util/yaml"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "sigs.k8s.io/yaml"
)
