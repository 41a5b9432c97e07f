#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy (no prebuilt downloads here) and caches it
# outside the clone, keyed by version; prints its path. Used by the chart tests.
set -euo pipefail
v=${HELM_VERSION:-3.19.0}
cache=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-sidecar}
bin="$cache/helm-$v/helm"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$(dirname "$bin")"
echo "helm.sh: building helm v$v (a few minutes on a cold cache)" >&2
GOFLAGS=-mod=mod GOBIN="$(dirname "$bin")" go install -trimpath -ldflags="-s -w" "helm.sh/helm/v3/cmd/helm@v$v"
echo "$bin"
