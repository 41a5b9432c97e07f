#!/usr/bin/env bash
# Routes at scale through the kube source (hack/bench-routes): for each KIND, size N and HAProxy
# version, N routes (HTTPRoutes through examples/templates/httproute.yaml, attached to one
# Gateway; or Ingresses through examples/templates/ingress.yaml), N Services and their
# EndpointSlices in a real kube-apiserver and etcd (hack/testbins.sh's binaries), the whole
# sidecar binary with --source=kube, a real HAProxy and a real backend per endpoint on loopback.
# Prints one Markdown table per run: start to every route served, then CHANGES changes of each
# kind (a new route to a new Service, a path changed, a route deleted, a backend's pod added),
# each timed from the return of its API write to the first answer through HAProxy that shows
# it (p50, p95, p99, max), HAProxy's reloads (its own counter), the sidecar's runtime-API
# updates and RSS, and its maximum RSS over the run.
#
#   hack/bench-routes.sh        # KINDS="httproute ingress" SIZES="1000 3000" VERSIONS="3.4 3.2" CHANGES=50 WAIT=20ms:1s
#   KINDS=httproute SIZES=10000 VERSIONS=3.4 hack/bench-routes.sh
#   STAGES=1 hack/bench-routes.sh   # the sidecar at debug level: the medians of its sync stages
#   PROFILE=/tmp/start.prof hack/bench-routes.sh   # a CPU profile of the sidecar's first 20 s
#   CHANGES_PROFILE=/tmp/chg.prof hack/bench-routes.sh   # a CPU profile of the sidecar over the new-route changes
#   CHANGES_PROFILE=/tmp/pod.prof CHANGES_PROFILE_KIND=pod hack/bench-routes.sh   # ... over another kind's (new path delete pod)
#   CHANGES_TRACE=/tmp/chg.trace STAGES=1 KEEP=1 hack/bench-routes.sh   # a Go execution trace of the sidecar over the first 30 s of the new-route changes
#   HEAPS=/tmp/heaps hack/bench-routes.sh   # its heap profile each time its max RSS grew by 5 MB
#   NEW_AMONG=1 hack/bench-routes.sh   # the new routes named to sort among the others, not after them all
#   GAP=7s CHANGES=10 hack/bench-routes.sh   # each change after the sidecar went idle (5 s after a sync), as between an operator's edits
#   STATS_SOCKET=0 hack/bench-routes.sh   # the runtime API through the master socket (by default through a stats socket, as the chart has it)
# VERSIONS are among those hack/haproxy-versions.sh provides (2.6 3.0 3.2 3.4); each runs with
# its bin directory first in PATH. KEEP=1 keeps each run's work directory (logs, haproxy.cfg).
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=$PATH:/usr/sbin
KINDS=${KINDS:-httproute ingress}
SIZES=${SIZES:-1000 3000}
VERSIONS=${VERSIONS:-3.4 3.2}
CHANGES=${CHANGES:-50}
WAIT=${WAIT:-20ms:1s}
STAGES=${STAGES:-0}
KEEP=${KEEP:-0}
NEW_AMONG=${NEW_AMONG:-0}

KUBEBUILDER_ASSETS=$(hack/testbins.sh)
export KUBEBUILDER_ASSETS
installed=$(hack/haproxy-versions.sh)
mkdir -p bin
go build -trimpath -o bin/haproxy-sidecar .
go build -o bin/bench-routes ./hack/bench-routes
flags=()
[ "$STAGES" = 1 ] && flags+=(--stages)
[ "$KEEP" = 1 ] && flags+=(--keep)
[ "$NEW_AMONG" = 1 ] && flags+=(--new-among)
[ -n "${GAP:-}" ] && flags+=(--gap "$GAP")
[ "${STATS_SOCKET:-1}" = 0 ] && flags+=(--stats-socket=false)
[ -n "${PROFILE:-}" ] && flags+=(--start-profile "$PROFILE")
[ -n "${CHANGES_PROFILE:-}" ] && flags+=(--changes-profile "$CHANGES_PROFILE" --changes-profile-kind "${CHANGES_PROFILE_KIND:-new}")
[ -n "${CHANGES_TRACE:-}" ] && flags+=(--changes-trace "$CHANGES_TRACE" --changes-profile-kind "${CHANGES_PROFILE_KIND:-new}")
[ -n "${HEAPS:-}" ] && flags+=(--heap-profiles "$HEAPS")
for v in $VERSIONS; do
  haproxy=$(tr ' ' '\n' <<<"$installed" | sed -n "s/^$v=//p")
  if [ -z "$haproxy" ]; then
    echo "bench-routes: no HAProxy $v among hack/haproxy-versions.sh's: $installed" >&2
    exit 1
  fi
  for kind in $KINDS; do
    for n in $SIZES; do
      echo
      echo "# bench-routes: $(date -u +%FT%TZ), haproxy $("$haproxy" -v | head -1 | awk '{print $3}'), $(go version | cut -d' ' -f3), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), --wait $WAIT, $kind x $n, $CHANGES changes of each kind"
      PATH="$(dirname "$haproxy"):$PATH" bin/bench-routes --sidecar bin/haproxy-sidecar --kind "$kind" --n "$n" \
        --changes "$CHANGES" --wait "$WAIT" "${flags[@]}"
    done
  done
done
