#!/usr/bin/env bash
# Builds what the Gateway API conformance harness (hack/conformance.sh) needs besides
# kube-apiserver, etcd and kubectl (hack/testbins.sh), from the Go module proxy, and caches it
# outside the clone keyed by versions; prints the directory. Nothing of it is kept in the clone.
#   kube-controller-manager, kube-scheduler   k8s.io/kubernetes at the API server's version
#   kwok, kwok.yaml                          sigs.k8s.io/kwok: the fake node and its pods, and
#                                            the stages that make them (node initialise and
#                                            heartbeat, pod ready, complete, delete)
#   conformance.test                         the suite, sigs.k8s.io/gateway-api/conformance
#   echo-basic                               the suite's echo backend, changed to listen on
#                                            $BIND_IP (one process per pod, on its pod's IP)
#   crds/                                    the Gateway API CRDs of the suite's release
#                                            (standard channel)
# Cold build: about 3 minutes on 2 cores with a warm module cache.
#   usage: hack/conformance-bins.sh      env: K8S_VERSION, GATEWAY_API_VERSION, KWOK_VERSION, TESTBIN_CACHE
set -euo pipefail
k8s=${K8S_VERSION:-1.36.3}
gwapi=${GATEWAY_API_VERSION:-1.6.3}
kwok=${KWOK_VERSION:-0.8.0}
cache=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-sidecar}
out="$cache/conformance-gwapi-$gwapi-k8s-$k8s-kwok-$kwok"
files=(kube-controller-manager kube-scheduler kwok kwok.yaml conformance.test echo-basic crds/gateway.networking.k8s.io_httproutes.yaml)
ready() {
  local f
  for f in "${files[@]}"; do [ -s "$out/$f" ] || return 1; done
}
if ready; then
  echo "$out"; exit 0
fi
log() { echo "conformance-bins: $*" >&2; }
# shellcheck source=hack/k8s-build.sh
. "$(dirname "$0")/k8s-build.sh"
mkdir -p "$out/crds"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod

log "building kube-controller-manager and kube-scheduler v$k8s"
k8s_build "$out" "$k8s" kube-controller-manager kube-scheduler

log "building kwok v$kwok"
GOBIN="$out" go install "sigs.k8s.io/kwok/cmd/kwok@v$kwok"
kwokdir="$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$kwok/kustomize/stage"
for s in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
  echo "---"
  cat "$kwokdir/$s.yaml"
done >"$out/kwok.yaml"

# The suite and its echo backend from a throwaway module: building inside the module cache
# fails (the conformance module replaces its parent module with ../).
log "building the Gateway API conformance suite v$gwapi and its echo backend"
mkdir -p "$work/conf/echo" && cd "$work/conf"
printf 'module conformancebuild\n\ngo 1.26\n\nrequire sigs.k8s.io/gateway-api/conformance v%s\n\nreplace sigs.k8s.io/gateway-api => sigs.k8s.io/gateway-api v%s\n' "$gwapi" "$gwapi" >go.mod
printf 'package tools\n\nimport _ "sigs.k8s.io/gateway-api/conformance"\n' >tools.go
go mod download -json "sigs.k8s.io/gateway-api/conformance@v$gwapi" "sigs.k8s.io/gateway-api@v$gwapi" >/dev/null
conf="$(go env GOMODCACHE)/sigs.k8s.io/gateway-api/conformance@v$gwapi"
# echo-basic listens on every address (":PORT"); each pod's process must listen on its own IP.
sed 's/fmt\.Sprintf(":%s", /fmt.Sprintf("%s:%s", os.Getenv("BIND_IP"), /' "$conf/echo-basic/echo-basic.go" >echo/main.go
changed=$(grep -c 'os.Getenv("BIND_IP")' echo/main.go || true)
if [ "$changed" != 3 ]; then
  log "echo-basic v$gwapi: expected 3 listen addresses (HTTP, H2C, HTTPS) to change, changed $changed"
  exit 1
fi
go mod tidy >/dev/null
go build -trimpath -o "$out/echo-basic" ./echo
go test -c -trimpath -o "$out/conformance.test" sigs.k8s.io/gateway-api/conformance

crds="$(go env GOMODCACHE)/sigs.k8s.io/gateway-api@v$gwapi/config/crd/standard"
cp "$crds"/gateway.networking.k8s.io_*.yaml "$out/crds/"
rm -f "$out/crds/"*vap* # a ValidatingAdmissionPolicy against downgrades, not a CRD
chmod -R u+w "$out/crds"
ready || { log "missing after the build: ${files[*]} in $out"; exit 1; }
echo "$out"
