#!/usr/bin/env bash
# Pod churn benchmark of the whole binary (hack/bench-churn): a service's pods become ready and
# unready one at a time under a keep-alive load, with a real HAProxy and real backends on
# loopback. Prints, for the runtime API on and then off: reloads, runtime updates, failed
# requests, and the time from each change to "served" (p50/p90/p99/max).
#
#   hack/bench-churn.sh                      # CHANGES=200 CHANGES_OFF=50 PODS=20 CONNS=4 INTERVAL=50ms
#   CHANGES=500 MODES=on hack/bench-churn.sh # only the runtime API run
#   EDIT=services SERVICES=1000 MODES=on hack/bench-churn.sh   # operator edits of the services ConfigMap,
#                                            # beside 1,000 other services (SIDECAR_ARGS=--check-before-runtime: checked first)
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=$PATH:/usr/sbin # Debian's haproxy, unless PATH names another first (a version of hack/haproxy-versions.sh)
CHANGES=${CHANGES:-200}
CHANGES_OFF=${CHANGES_OFF:-50} # every change reloads: slower, fewer of them
PODS=${PODS:-20}
CONNS=${CONNS:-4}
INTERVAL=${INTERVAL:-50ms}
MODES=${MODES:-"on off"}
EDIT=${EDIT:-pods}
SERVICES=${SERVICES:-0}
SIDECAR_ARGS=${SIDECAR_ARGS:-}
WAIT=${WAIT:-10ms:200ms}

hack/install-deps.sh
mkdir -p bin
go build -trimpath -o bin/haproxy-sidecar .
go build -o bin/bench-churn ./hack/bench-churn
echo "haproxy $(haproxy -v | head -1 | awk '{print $3}'), $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
for mode in $MODES; do
  runtime=true changes=$CHANGES
  [ "$mode" = off ] && runtime=false changes=$CHANGES_OFF
  bin/bench-churn --sidecar bin/haproxy-sidecar --changes "$changes" --pods "$PODS" \
    --conns "$CONNS" --interval "$INTERVAL" --runtime-api="$runtime" \
    --edit "$EDIT" --services "$SERVICES" --sidecar-args "$SIDECAR_ARGS" --wait "$WAIT"
done
