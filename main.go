// Command haproxy-sidecar keeps HAProxy configured from Kubernetes objects: it renders
// Jinja-style templates into haproxy.cfg and a certificate directory, validates the result
// with haproxy -c, and reloads HAProxy gracefully, confirming every reload. This file only
// picks the command: package config reads the flags, package sidecar runs the program.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/memory"
)

const topUsage = `haproxy-sidecar keeps HAProxy configured from Kubernetes objects.

It reads the "services" ConfigMap, certificate ConfigMaps and Secrets, the pods the services
select and a Jinja-style template (the "config" ConfigMap), renders haproxy.cfg and a
certificate directory, validates them with haproxy -c, and reloads HAProxy gracefully through
its master CLI socket, confirming each reload. Bad input never reaches HAProxy.

Usage:
  haproxy-sidecar run      [flags]   watch the inputs and keep HAProxy configured
  haproxy-sidecar render   [flags]   render once into --out DIR (preview a template change)
  haproxy-sidecar validate [flags]   render and validate once, write nothing; exit 1 if invalid
  haproxy-sidecar diff     [flags]   what a change would do (the files, reload or runtime API, what is
                                     held), against a running sidecar (--live) or manifests (--base)
  haproxy-sidecar version

Run "haproxy-sidecar <command> --help" for the flags; every flag has an environment twin,
HAPROXY_SIDECAR_ and its name in upper snake case (--master-socket: HAPROXY_SIDECAR_MASTER_SOCKET).
`

// summary is the first lines of a command's help.
func summary(cmd string) string {
	switch cmd {
	case "render":
		return "haproxy-sidecar render: read the inputs once, render haproxy.cfg, certs/, maps/ and files/ into --out DIR, and\n" +
			"validate them with haproxy -c (--validate=false where HAProxy is not installed). Every input that is rejected\n" +
			"is named, with its object, key and line. Exit status 1 on any error."
	case "diff":
		return "haproxy-sidecar diff: take the proposed inputs (the source, -f FILE overlays, --delete KIND/NS/NAME) through\n" +
			"run's steps and compare with the current state (--live STATE_DIR of a running sidecar, or --base DIR):\n" +
			"a unified diff of the files, the certificates changed, what HAProxy would get (nothing, runtime API\n" +
			"commands, or a reload and why), and the inputs that would be held. Acts on nothing.\n" +
			"Exit status: 0 nothing would change, 1 changes, 2 trouble, 3 an input would be held."
	case "validate":
		return "haproxy-sidecar validate: read the inputs once, render and validate with haproxy -c; write\n" +
			"nothing, print the hash run would make live. Exit status 0: valid; 1: invalid (every input rejected is\n" +
			"named, with its object, key and line)."
	}
	return "haproxy-sidecar run: watch the inputs and keep HAProxy configured."
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, topUsage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	env := sidecar.Env{Log: os.Stderr, Memory: memory.ApplyDefaults(os.Getenv, "/sys/fs/cgroup"), Process: true}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	// The first stop signal ends ctx (run may then drain for --shutdown-delay); a second one
	// gets the signal's default action: the process ends at once.
	context.AfterFunc(ctx, stop)
	switch cmd {
	case "run", "render", "validate", "diff":
		// A misspelt variable would be ignored in silence.
		for _, w := range config.UnknownEnv(os.Environ()) {
			fmt.Fprintf(os.Stderr, "haproxy-sidecar: warning: %s\n", w)
		}
	}
	var err error
	switch cmd {
	case "run":
		var cfg *config.Run
		if cfg, err = config.ParseRun(args, summary(cmd), os.Getenv, os.Stderr); err == nil {
			err = sidecar.Run(ctx, cfg, env)
		}
	case "render", "validate":
		var cfg *config.Once
		if cfg, err = config.ParseOnce(cmd, args, summary(cmd), os.Getenv, os.Stderr); err == nil {
			err = sidecar.Once(ctx, cfg, os.Stdout, env)
		}
	case "diff":
		stop()
		os.Exit(diff(args, env))
	case "version", "--version", "-version":
		fmt.Println("haproxy-sidecar", sidecar.Build())
	case "help", "--help", "-help", "-h":
		fmt.Print(topUsage)
	default:
		fmt.Fprintf(os.Stderr, "haproxy-sidecar: unknown command %q\n\n%s", cmd, topUsage)
		os.Exit(2)
	}
	switch {
	case errors.Is(err, config.ErrHelp):
		os.Exit(0)
	case err != nil:
		stop()
		var rejected *sidecar.Rejected
		if errors.As(err, &rejected) {
			fmt.Fprintln(os.Stderr, err) // each line names its input, from the start (FILE:LINE:COL)
		} else {
			fmt.Fprintf(os.Stderr, "haproxy-sidecar: %v\n", err)
		}
		os.Exit(1)
	}
}

// diff runs the diff command and returns its exit status: diff(1)'s, 2 for trouble.
func diff(args []string, env sidecar.Env) int {
	cfg, err := config.ParseDiff(args, summary("diff"), os.Getenv, os.Stderr)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	status := 0
	if err == nil {
		status, err = sidecar.Diff(context.Background(), cfg, os.Stdout, env)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "haproxy-sidecar: %v\n", err)
		return 2
	}
	return status
}
