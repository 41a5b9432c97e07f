#!/usr/bin/env bash
# Builds the real Kubernetes API server, kubectl and etcd that the Kubernetes-source tests run
# against, from the Go module proxy, and caches them outside the clone keyed by version, so a
# second run (or CI on the same machine) reuses them. Prints the directory (use it as
# KUBEBUILDER_ASSETS). Cold build: about 7 minutes on 2 cores.
#   usage: hack/testbins.sh            env: K8S_VERSION, ETCD_VERSION, TESTBIN_CACHE
set -euo pipefail
k8s=${K8S_VERSION:-1.36.3}
etcd=${ETCD_VERSION:-3.6.8}
cache=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-sidecar}
out="$cache/k8s-$k8s-etcd-$etcd"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ]; then
  echo "$out"; exit 0
fi
mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
log() { echo "testbins: $*" >&2; }
# shellcheck source=hack/k8s-build.sh
. "$(dirname "$0")/k8s-build.sh"

log "building kube-apiserver and kubectl v$k8s (several minutes on a cold cache)"
k8s_build "$out" "$k8s" kube-apiserver kubectl

# etcd in its own module: its dependency versions differ from Kubernetes'.
log "building etcd v$etcd"
mkdir -p "$work/etcd/cmd" && cd "$work/etcd"
printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >cmd/main.go
printf 'module etcdbin\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$etcd" >go.mod
go mod tidy >/dev/null 2>&1
go build -trimpath -ldflags="-s -w" -o "$out/etcd" ./cmd
echo "$out"
