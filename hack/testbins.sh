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

# kube-apiserver and kubectl: k8s.io/kubernetes pins its staging modules (k8s.io/api, ...) to
# v0.0.0 with replace directives to ./staging; a consumer must replace each with the release.
log "building kube-apiserver and kubectl v$k8s (several minutes on a cold cache)"
mkdir -p "$work/kube" && cd "$work/kube"
GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$k8s" >/dev/null
modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$k8s.mod"
staging="v0.${k8s#1.}"
{
  printf 'module testbins\n\ngo 1.26\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$k8s"
  sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print $1}' |
    grep -v -e sample-cli-plugin -e sample-controller |
    while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
  printf ')\n'
} >go.mod
printf 'package tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' >tools.go
go mod tidy >/dev/null 2>&1
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $p.gitVersion=v$k8s -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$k8s" | cut -d. -f2)"
done
go build -trimpath -ldflags="$ldflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags="$ldflags" -o "$out/kubectl" k8s.io/kubernetes/cmd/kubectl

# etcd in its own module: its dependency versions differ from Kubernetes'.
log "building etcd v$etcd"
mkdir -p "$work/etcd/cmd" && cd "$work/etcd"
printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >cmd/main.go
printf 'module etcdbin\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$etcd" >go.mod
go mod tidy >/dev/null 2>&1
go build -trimpath -ldflags="-s -w" -o "$out/etcd" ./cmd
echo "$out"
