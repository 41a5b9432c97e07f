// Package etcdtest runs a real etcd server (the etcd binary hack/testbins.sh builds) on
// loopback for tests: plain or with TLS and client-certificate authentication (certificates
// generated in the test), stopped and restarted on the same ports and data directory, with a
// compaction helper and a TCP proxy that can cut a client off while etcd keeps running. Every
// process is stopped when the test ends.
package etcdtest
