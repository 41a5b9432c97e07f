#!/usr/bin/env bash
# Runs the sidecar for real on examples/local: small backends on loopback, HAProxy in
# master-worker mode, and the sidecar watching examples/local. Edit a file there and HAProxy
# serves the change within a second. Ctrl-C stops everything.
#   DEMO_CHECK=1 hack/demo.sh   starts everything, checks traffic flows, and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH=/usr/sbin:$PATH
say() { echo "demo: $*"; }

hack/install-deps.sh # says what it installs, if anything
mkdir -p bin
say "building the sidecar (a few minutes the first time, while Go fetches and compiles its modules)..."
"${MAKE:-make}" --no-print-directory -s build # with the version stamped, as make build does
go build -o bin/demo-backend ./hack/demo-backend

D=$PWD/.demo
rm -rf "$D"; mkdir -p "$D"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting five backends, the pods of examples/local/pods.yaml (127.0.0.11-13 and 127.0.0.21-22, port 8080)..."
bin/demo-backend 127.0.0.11:8080=web-1 127.0.0.12:8080=web-2 127.0.0.13:8080=web-3 \
  127.0.0.21:8080=api-1 127.0.0.22:8080=api-2 >"$D/backends.log" 2>&1 &
pids+=($!)

say "starting the sidecar on examples/local..."
export HTTP_BIND=127.0.0.1:8000 HTTPS_BIND=127.0.0.1:8443 STATS_BIND=127.0.0.1:8404
export STATISTICS_PASSWORD=${STATISTICS_PASSWORD:-stats-pw-2k9}  # not a word that is in paths: logs redact it everywhere
bin/haproxy-sidecar run --source=file --dir examples/local \
  --haproxy-config "$D/haproxy.cfg" --master-socket "$D/master.sock" \
  --env-allow HTTP_BIND,HTTPS_BIND,STATS_BIND --wait 100ms:1s \
  --health-addr 127.0.0.1:18080 --metrics-addr 127.0.0.1:19090 >"$D/sidecar.log" 2>&1 &
pids+=($!)

wait_for() { # what, command...
  local what=$1; shift
  for _ in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "demo: timed out waiting for $what (logs: $D/*.log)" >&2; exit 1
}
wait_for "the first configuration" test -e "$D/haproxy.cfg"
say "starting HAProxy on the configuration the sidecar wrote..."
haproxy -W -S "$D/master.sock,level,admin" -f "$D/haproxy.cfg" >"$D/haproxy.log" 2>&1 &
pids+=($!)
wait_for "HAProxy" curl -sf -H 'Host: web.localhost' http://127.0.0.1:8000/
wait_for "the sidecar to be ready" curl -sf http://127.0.0.1:18080/readyz

# The sidecar's log so far, then as it comes. Until HAProxy ran, the sidecar said at INFO that
# HAProxy was not running yet (its first configuration waited for HAProxy to start): the demo
# started HAProxy only then, so those lines are left out here; $D/sidecar.log has them.
say "the sidecar's log ($D/sidecar.log):"
n=$(wc -l <"$D/sidecar.log")
head -n "$n" "$D/sidecar.log" | grep -v -e 'HAProxy is not running (yet)' -e 'HAProxy is not running yet' \
  -e 'HAProxy not started yet' || true
tail -n "+$((n + 1))" -F "$D/sidecar.log" 2>/dev/null &
pids+=($!)

cat <<MSG

  The sidecar is running on examples/local. Try:
    curl -H 'Host: web.localhost' http://127.0.0.1:8000/          # web-1 / web-2, round robin
    curl -H 'Host: api.localhost' http://127.0.0.1:8000/v1/users  # api-1
    curl -k --resolve web.localhost:8443:127.0.0.1 https://web.localhost:8443/
    curl -u stats:$STATISTICS_PASSWORD http://127.0.0.1:8404/                        # HAProxy stats
    curl http://127.0.0.1:19090/metrics | grep haproxy_sidecar    # the sidecar's metrics
  Then make the pod api-5c6b-pqrst ready: its Ready condition "True" and its container's
  ready: true (either one false keeps a pod out). This does both:
    sed -i 's/status: "False"/status: "True"/; s/ready: false/ready: true/' examples/local/pods.yaml
  Within a second api-2 answers too, with no reload (git checkout examples/local/pods.yaml takes
  it back). Edit services.yaml or config.yaml there and watch the change go live.
  Logs: $D/*.log. Ctrl-C stops everything.

MSG
if [ "${DEMO_CHECK:-}" = 1 ]; then
  curl -sf -H 'Host: web.localhost' http://127.0.0.1:8000/ | grep -q '^web-'
  curl -sf -H 'Host: api.localhost' http://127.0.0.1:8000/v1/x | grep -q '^api-1'
  curl -sfk --resolve web.localhost:8443:127.0.0.1 https://web.localhost:8443/ | grep -q '^web-'
  echo "demo check: OK"
  exit 0
fi
wait "${pids[@]}"
