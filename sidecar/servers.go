package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/candidate"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/serversync"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// serversMode reports whether the sidecar manages only the servers of the hosts' backends
// (--reload=dataplane --dataplane-mode=servers).
func serversMode(cfg *config.Run) bool {
	return cfg.HAProxy.Remote() && cfg.Dataplane.Mode == "servers"
}

// serversChecker is haproxy -c, then, with --dataplane-mode=servers, whether the servers of the
// managed backends can be written through the Data Plane API's server model. A line the model
// cannot hold is refused at validation like a line HAProxy refuses, so that the input that
// wrote it is found and held while the rest goes live.
type serversChecker struct {
	haproxy  candidate.Checker
	backends []string
}

func (c serversChecker) Check(ctx context.Context, cfgPath string) error {
	_, err := c.CheckWarnings(ctx, cfgPath)
	return err
}

// CheckWarnings is Check, and what haproxy -c warned about.
func (c serversChecker) CheckWarnings(ctx context.Context, cfgPath string) ([]string, error) {
	var warnings []string
	var err error
	if wc, ok := c.haproxy.(interface {
		CheckWarnings(context.Context, string) ([]string, error)
	}); ok {
		warnings, err = wc.CheckWarnings(ctx, cfgPath)
	} else {
		err = c.haproxy.Check(ctx, cfgPath)
	}
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cfgPath, err)
	}
	if _, err := serversync.FromConfig(text, c.backends); err != nil {
		msg, line := err.Error(), 0
		var se *serversync.Error
		if errors.As(err, &se) {
			msg, line = se.Msg, se.Line
		}
		msg = "the servers cannot be written through the Data Plane API (--dataplane-mode=servers): " + msg
		return nil, &validate.CheckError{Output: msg, Alerts: []string{msg}, File: cfgPath, Line: line}
	}
	return warnings, nil
}
