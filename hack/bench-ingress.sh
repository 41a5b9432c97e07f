#!/usr/bin/env bash
# Scale run of the Ingress example (examples/templates/ingress.yaml) through the binary
# (hack/bench-ingress): INGRESSES Ingresses with as many backends in file mode, a real HAProxy
# and a real backend per Service on loopback. Prints the start (first configuration, RSS), for
# each of CHANGES path changes the time from the edit of the Ingress's file to the new path
# served (it includes the debounce's minimum, --wait MIN:MAX), the reloads HAProxy made and the
# map updates the sidecar made, then NEW_SERVICES Ingresses for a new Service (a new backend),
# each added and deleted (served / no longer served, reloads: none from HAProxy 3.4 on), a path
# to a new backend (one reload before 3.4), and the sidecar's maximum RSS.
#
#   hack/bench-ingress.sh                       # INGRESSES=1000 CHANGES=10 NEW_SERVICES=5 RUNS=3 WAIT=100ms:1s
#   WAIT=20ms:1s RUNS=1 hack/bench-ingress.sh
#   PATH=~/.cache/haproxy-sidecar/haproxy-3.2.26-1/bin:$PATH hack/bench-ingress.sh  # another HAProxy
#   SOURCE=kube hack/bench-ingress.sh           # the objects in a real kube-apiserver (hack/testbins.sh), --source=kube
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=$PATH:/usr/sbin
INGRESSES=${INGRESSES:-1000}
CHANGES=${CHANGES:-10}
NEW_SERVICES=${NEW_SERVICES:-5}
RUNS=${RUNS:-3}
WAIT=${WAIT:-100ms:1s}
SOURCE=${SOURCE:-file}
if [ "$SOURCE" = kube ]; then
  KUBEBUILDER_ASSETS=$(hack/testbins.sh)
  export KUBEBUILDER_ASSETS
fi

command -v haproxy >/dev/null || { echo "bench-ingress: haproxy is needed (hack/install-deps.sh)" >&2; exit 1; }
mkdir -p bin
go build -trimpath -o bin/haproxy-sidecar .
go build -o bin/bench-ingress ./hack/bench-ingress
echo "# bench-ingress: $(date -u +%FT%TZ), haproxy $(haproxy -v | head -1 | awk '{print $3}'), $(go version | cut -d' ' -f3), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), --wait $WAIT, source $SOURCE"
for r in $(seq 1 "$RUNS"); do
  echo "## run $r"
  bin/bench-ingress --sidecar bin/haproxy-sidecar --ingresses "$INGRESSES" --changes "$CHANGES" --new-services "$NEW_SERVICES" --wait "$WAIT" --source "$SOURCE"
done
