package sidecar

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

func TestJSONLogsPrintDurationsInSeconds(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.Log{Level: "info", Format: "json"}, &buf, newRedactor(config.Inputs{}, config.Etcd{}, &config.Dataplane{}))
	if err != nil {
		t.Fatal(err)
	}
	log.With("wait", 200*time.Millisecond).Info("configuration live", "reload", 1500*time.Millisecond,
		"runtime_api", 250*time.Microsecond, "count", 3)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	for key, want := range map[string]float64{"wait": 0.2, "reload": 1.5, "runtime_api": 0.00025, "count": 3} {
		if got, ok := line[key].(float64); !ok || got != want {
			t.Errorf("%s = %v, want %v (line %s)", key, line[key], want, buf.String())
		}
	}
}

func TestTextLogsPrintDurationsForPeople(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.Log{Level: "info", Format: "text"}, &buf, newRedactor(config.Inputs{}, config.Etcd{}, &config.Dataplane{}))
	if err != nil {
		t.Fatal(err)
	}
	log.Info("configuration live", "reload", 1500*time.Millisecond)
	if !strings.Contains(buf.String(), "reload=1.5s") {
		t.Errorf("text line %q, want reload=1.5s", buf.String())
	}
}
