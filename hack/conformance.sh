#!/usr/bin/env bash
# The Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, profile GATEWAY-HTTP)
# against the sidecar serving examples/templates/httproute.yaml and writing the status, on this
# machine without a container runtime (hack/conformance/main.go says what runs). Builds what it
# needs first, cached outside the clone (hack/testbins.sh, hack/conformance-bins.sh,
# hack/haproxy-versions.sh), the sidecar from the working tree, then runs the harness in a
# network namespace of its own where the pods' IPs and the Gateway's address (10.244.0.0/16) are
# local; nothing it starts is reachable from outside that namespace.
#
#   hack/conformance.sh                      # the whole suite: about 2 min on 2 cores (most tests pass at once;
#                                            each failing one waits up to its timeouts)
#   RUN_TEST=HTTPRouteSimpleSameNamespace hack/conformance.sh   # one test (a short check)
# env: OUT (bin/conformance: report.yaml, summary.txt, conformance.log, logs/), HAPROXY_VERSION
# (3.4; "path" for the haproxy in PATH), TIMEOUT (80m), KEEP=1 (keep the work directory),
# FEATURES (the features claimed, comma-separated; default: hack/conformance/main.go's
# --supported-features, the core ones and the extended ones the example serves).
# Needs root (or CAP_SYS_ADMIN) for unshare -n, and ip (iproute2).
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=$PATH:/usr/sbin
OUT=${OUT:-bin/conformance}
HAPROXY_VERSION=${HAPROXY_VERSION:-3.4}
TIMEOUT=${TIMEOUT:-80m}
RUN_TEST=${RUN_TEST:-}
KEEP=${KEEP:-0}
FEATURES=${FEATURES:-}

KUBEBUILDER_ASSETS=$(hack/testbins.sh)
export KUBEBUILDER_ASSETS
bins=$(hack/conformance-bins.sh)
if [ "$HAPROXY_VERSION" != path ]; then
  haproxy=$(hack/haproxy-versions.sh | tr ' ' '\n' | sed -n "s/^$HAPROXY_VERSION=//p")
  if [ -z "$haproxy" ]; then
    echo "conformance: no HAProxy $HAPROXY_VERSION from hack/haproxy-versions.sh" >&2
    exit 1
  fi
  PATH="$(dirname "$haproxy"):$PATH"
fi
echo "conformance: $(haproxy -v | head -1)" >&2
version=$(hack/version.sh)
mkdir -p bin
go build -trimpath -ldflags "-X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=$version" -o bin/haproxy-sidecar .
go build -o bin/conformance-harness ./hack/conformance
flags=(--bins "$bins" --sidecar bin/haproxy-sidecar --out "$OUT" --timeout "$TIMEOUT" --version "$version")
[ -n "$RUN_TEST" ] && flags+=(--run-test "$RUN_TEST")
[ "$KEEP" = 1 ] && flags+=(--keep)
[ -n "$FEATURES" ] && flags+=(--supported-features "$FEATURES")

# unshare -n: a network namespace with only lo, brought up, where every address of
# 10.244.0.0/16 is local; the harness (and all it starts) lives and ends in it.
exec unshare -n -- bash -c 'set -euo pipefail
ip link set lo up
ip route add local 10.244.0.0/16 dev lo table local
exec "$@"' conformance bin/conformance-harness "${flags[@]}"
