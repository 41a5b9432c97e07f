// Package reload is the last stage's folder: a rendering made into what HAProxy runs. Its
// packages, in the order data passes through them:
//
//   - candidate: the inputs of a sync rendered, staged as a generation and validated.
//   - decide: the sync's one decision, a pure function of plain values.
//   - apply: carrying the decision out.
//   - live: what HAProxy runs and what is written, one owner changed by events.
//   - generation: the files on disk, each rendering a complete generation made live by one
//     atomic rename.
//   - rollout: a canary's verdict from HAProxy's counters.
//   - haproxy/...: everything that talks to HAProxy: validate (haproxy -c), cli (the CLI
//     sockets), runtimeapi (changes with no reload), reload (the master socket), cfgparse,
//     serversync and dataplane (remote hosts through the Data Plane API).
//   - tracing: the spans the stages of a sync open.
package reload
