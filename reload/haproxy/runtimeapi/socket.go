package runtimeapi

import "github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"

// Socket talks to an HAProxy CLI socket: a stats socket at level admin
// (`stats socket PATH level admin`), or the master CLI socket (`haproxy -W -S PATH,level,admin`),
// in which case commands need the "@1 " prefix to reach the current worker (see Updater). It is
// the project's one CLI client, cli.Client (the reload uses it too).
type Socket = cli.Client
