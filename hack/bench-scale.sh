#!/usr/bin/env bash
# Scale benchmark of the whole binary: `render` of 1,000 and 10,000 services x 10 ready pods
# (hack/gen-scale: one services ConfigMap, one pods List), a `run` scenario on 10,000 x 10
# that edits one pod's readiness and waits for the re-render, and a `big` scenario: `run` on a
# small directory beside a large unrelated manifest (BIG_MB of Deployments, or of Pods no
# service selects; JSON and YAML), one line appended to it, then one object of it edited, each
# followed by an unrelated edit. Prints wall time, CPU time and maximum RSS
# for each; and an `idle` scenario: `run` on IDLE_SIZES services x PODS, left alone IDLE_WAIT
# seconds after its first configuration, then its RSS split as /proc/PID/smaps_rollup splits
# it (anonymous: the heap and the runtime; file-backed: the binary's pages) and the Go heap
# from its /metrics. Everything it starts is stopped on exit.
#
#   hack/bench-scale.sh                    # SIZES="1000 10000" PODS=10 RUNS=3 CHANGES=5 BIG_MB=100
#   SIZES=10000 RUNS=1 hack/bench-scale.sh
#   SIZES= RUN_SIZE=0 BIG_FORMATS=json hack/bench-scale.sh   # the big scenario only, JSON only
#   SIZES= RUN_SIZE=0 BIG_KINDS=pod hack/bench-scale.sh      # ... a manifest of Pods only
#   SIZES= RUN_SIZE=0 BIG_MB=0 IDLE_SIZES="1 1000" IDLE_RUNS=3 hack/bench-scale.sh  # idle RSS only
#   IDLE_FLAGS="--validate --master-socket /nonexistent.sock" ...  # idle, with the runtime API's model
#   GOGC=25 hack/bench-scale.sh            # Go runtime settings apply to the binary measured
#   SIZES= IDLE_SIZES= BIG_MB=0 CHANGES=10 CHANGE_GAP=7 hack/bench-scale.sh  # pod edits, each after the sidecar went idle
#   BIN=/tmp/old-haproxy-sidecar hack/bench-scale.sh  # another build
#
# Needs go, curl and GNU time (/usr/bin/time). Work files go to $BENCH_DIR (default a
# temporary directory, removed on exit unless KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES-"1000 10000"}
PODS=${PODS:-10}
RUNS=${RUNS:-3}
RUN_SIZE=${RUN_SIZE:-10000} # services in the run scenario (0: skip it)
CHANGES=${CHANGES:-5}       # pod edits in the run scenario
CHANGE_GAP=${CHANGE_GAP:-0} # seconds left alone before each pod edit (7: the sidecar idle before each, as between an operator's edits)
DEADLINE=${DEADLINE:-300}   # seconds any single step may take
# RUN_FLAGS: how the run scenario reloads. The default measures the sidecar alone; with
# RUN_FLAGS="--validate=false --master-socket /nonexistent.sock" it also keeps the runtime
# API's model of what HAProxy runs (no HAProxy answers, so every change falls back to a reload
# that finds HAProxy not running).
RUN_FLAGS=${RUN_FLAGS:-"--reload=none --validate=false"}
IDLE_SIZES=${IDLE_SIZES-"1 1000"} # services in the idle scenario ("": skip it)
IDLE_RUNS=${IDLE_RUNS:-1}
IDLE_WAIT=${IDLE_WAIT:-10}  # seconds left alone after the first configuration (the sidecar hands
                            # back what it kept for the next sync 5 s after a sync)
IDLE_FLAGS=${IDLE_FLAGS:-$RUN_FLAGS}
BIG_MB=${BIG_MB:-100}                  # the big scenario's unrelated manifest (0: skip it)
BIG_FORMATS=${BIG_FORMATS:-"json yaml yaml-list"} # ... as a JSON List, multi-document YAML, a YAML List
BIG_KINDS=${BIG_KINDS:-"deployment pod"} # ... of Deployments (ignored) or of Pods no service selects (kept)

[ -x /usr/bin/time ] || { echo "bench-scale: /usr/bin/time (GNU time) is needed" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench-scale: curl is needed" >&2; exit 1; }

D=${BENCH_DIR:-$(mktemp -d /tmp/haproxy-sidecar-bench.XXXXXX)}
mkdir -p "$D"
run_pid=
cleanup() {
  if [ -n "$run_pid" ]; then
    kill "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  [ "${KEEP:-}" = 1 ] || [ -n "${BENCH_DIR:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

echo "# haproxy-sidecar bench-scale: $(date -u +%FT%TZ), $(go version | cut -d' ' -f3-), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), GOMEMLIMIT=${GOMEMLIMIT:-unset} GOGC=${GOGC:-unset}"
if [ -z "${BIN:-}" ]; then # BIN=path: measure that binary (an older build, for a comparison)
  go build -trimpath -o "$D/haproxy-sidecar" .
  BIN=$D/haproxy-sidecar
else
  # A fresh copy: how many of the binary's pages a process maps depends on how the file came
  # into the page cache (the kernel maps whole folios, and up to 64 kB around each fault), so
  # two builds are compared as two copies made the same way.
  cp "$BIN" "$D/haproxy-sidecar.measured"
  BIN=$D/haproxy-sidecar.measured
fi
go build -o "$D/gen-scale" ./hack/gen-scale

gen() { # services -> directory
  local dir=$D/scale-$1x$PODS
  [ -d "$dir" ] || "$D/gen-scale" -services "$1" -pods "$PODS" -out "$dir" >/dev/null
  echo "$dir"
}

# render: cold start of the one-shot command, RUNS times per size.
for n in $SIZES; do
  dir=$(gen "$n")
  size=$(du -sm "$dir" | cut -f1)
  for r in $(seq 1 "$RUNS"); do
    rm -rf "$D/out"
    timeout "$DEADLINE" /usr/bin/time -v "$BIN" render --dir "$dir" --out "$D/out" --validate=false \
      >/dev/null 2>"$D/time.txt" || { cat "$D/time.txt" >&2; exit 1; }
    awk -v n="$n" -v p="$PODS" -v r="$r" -v mb="$size" -F': ' '
      /Elapsed \(wall clock\)/ { split($2, t, ":"); wall = t[1] * 60 + t[2] }
      /User time/ { user = $2 } /System time/ { sys = $2 }
      /Maximum resident set size/ { rss = $2 / 1024 }
      END { printf "render %5d services x %d pods (%d MB of manifests) run %d: wall %.2f s, cpu %.2f s, max RSS %.0f MB\n", n, p, mb, r, wall, user + sys, rss }' "$D/time.txt"
  done
  echo "  haproxy.cfg: $(wc -c <"$D/out/haproxy.cfg") bytes, $(grep -c '^backend ' "$D/out/haproxy.cfg") backends, $(grep -c '^ *server ' "$D/out/haproxy.cfg") servers"
done

start_run() { # directory [flags]: start `run` on it (run_pid), wait until it serves its endpoints (addr)
  rm -rf "$D/run" "$D/run.log" # no address of the last run read before this one truncates the log
  mkdir -p "$D/run"
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  "$BIN" run --source=file --dir "$1" --haproxy-config "$D/run/haproxy.cfg" ${2:-$RUN_FLAGS} \
    --wait 100ms:1s --health-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 >"$D/run.log" 2>&1 &
  run_pid=$!
  until_deadline 30 find_addr
}
stop_run() {
  kill "$run_pid" 2>/dev/null || true
  wait "$run_pid" 2>/dev/null || true
  run_pid=
}

until_deadline() { # seconds, command...: run command until it succeeds or seconds pass
  local end=$(($(date +%s) + $1)); shift
  until "$@"; do
    if [ "$(date +%s)" -ge "$end" ] || ! kill -0 "$run_pid" 2>/dev/null; then
      echo "bench-scale: timed out or the sidecar exited; its log:" >&2; tail -20 "$D/run.log" >&2; exit 1
    fi
    sleep 0.02
  done
}
addr=
find_addr() { addr=$(sed -n 's/.*msg=serving addr=\([^ ]*\).*/\1/p' "$D/run.log" | head -1); [ -n "$addr" ]; }
ready() { curl -sf "http://$addr/readyz" >/dev/null; }
hwm() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$run_pid/status"; }
# reset_hwm makes VmHWM the peak from now on (Linux: 5 into clear_refs), so that a change's
# own peak is seen apart from the first read's.
reset_hwm() { echo 5 >"/proc/$run_pid/clear_refs" 2>/dev/null || true; }
rss() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$run_pid/status"; }
metric() { # name with labels -> value
  curl -sf "http://$addr/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}
rendered() { [ "$(successes)" ] && [ "$(successes)" != 0 ]; }
successes() { metric 'haproxy_sidecar_renders_total{result="success"}'; }
render_sum() { metric 'haproxy_sidecar_render_duration_seconds_sum'; }
render_count() { metric 'haproxy_sidecar_render_duration_seconds_count'; }

# idle: RSS once the sidecar is left alone, split: anonymous memory (the Go heap, its free pages
# not yet handed back, the runtime's own) and file-backed pages (the binary's code and data it
# touched), with the heap as the Go runtime counts it.
smaps() { awk -v f="$1" '$1 == f ":" { printf "%.0f", $2 / 1024 }' "/proc/$run_pid/smaps_rollup"; }
mb_metric() { awk -v v="$(metric "$1")" 'BEGIN { printf "%.1f", v / 1048576 }'; }
idle_scenario() {
  local n r dir t0 t1 held
  for n in $IDLE_SIZES; do
    dir=$(gen "$n")
    for r in $(seq 1 "$IDLE_RUNS"); do
      t0=$(now)
      start_run "$dir" "$IDLE_FLAGS"
      # The first configuration rendered (not /readyz: with IDLE_FLAGS naming a master socket
      # no HAProxy answers, the sidecar is never ready).
      until_deadline "$DEADLINE" rendered
      t1=$(now)
      sleep "$IDLE_WAIT" # what is measured is the sidecar left alone
      held=$(awk -v i="$(metric go_memstats_heap_idle_bytes)" -v r="$(metric go_memstats_heap_released_bytes)" 'BEGIN { printf "%.1f", (i - r) / 1048576 }')
      echo "idle   $n services x $PODS pods run $r: first configuration after $(ms "$t0" "$t1") ms; ${IDLE_WAIT} s later RSS $(rss) MB (anonymous $(smaps Anonymous) MB, file-backed $(smaps Rss | awk -v a="$(smaps Anonymous)" '{ print $1 - a }') MB), max RSS $(hwm) MB; Go heap in use $(mb_metric go_memstats_heap_inuse_bytes) MB, free and not handed back $held MB, objects $(mb_metric go_memstats_heap_alloc_bytes) MB, the runtime's own (mapped) $(awk -v s="$(metric go_memstats_sys_bytes)" -v h="$(metric go_memstats_heap_sys_bytes)" 'BEGIN { printf "%.1f", (s - h) / 1048576 }') MB"
      stop_run
    done
  done
}
if [ -n "$IDLE_SIZES" ]; then idle_scenario; fi

run_scenario() {
# run: start on RUN_SIZE services, wait for /readyz, then edit one pod CHANGES times (ready,
# not ready, ready, ...) and wait each time for the render that follows.
src=$(gen "$RUN_SIZE")
dir=$D/run-input
rm -rf "$dir"
cp -r "$src" "$dir"
t0=$(now)
start_run "$dir"
until_deadline "$DEADLINE" ready
t1=$(now)
echo "run    $RUN_SIZE services x $PODS pods: ready (first configuration written) after $(ms "$t0" "$t1") ms; RSS $(rss) MB, max RSS $(hwm) MB"

pod=$(grep -o '"name":"svc-00000-0"' "$dir/pods.json" | head -1)
[ -n "$pod" ] || { echo "bench-scale: pod svc-00000-0 not found" >&2; exit 1; }
for c in $(seq 1 "$CHANGES"); do
  sleep "$CHANGE_GAP"
  before=$(successes)
  sum_before=$(render_sum)
  count_before=$(render_count)
  if [ $((c % 2)) = 1 ]; then from=true to=false; else from=false to=true; fi
  # The first container status in the file is pod svc-00000-0's.
  t0=$(now)
  sed -i "0,/\"ready\":$from/s//\"ready\":$to/" "$dir/pods.json"
  changed() { [ "$(successes)" != "$before" ]; }
  until_deadline "$DEADLINE" changed
  t1=$(now)
  took=$(awk -v a="$sum_before" -v b="$(render_sum)" 'BEGIN { printf "%d", (b - a) * 1000 }')
  syncs=$(($(render_count) - count_before))
  echo "run    change $c (pod svc-00000-0 ready=$to): new configuration after $(ms "$t0" "$t1") ms (includes the 100 ms debounce); read+build+render $took ms in $syncs sync(s); RSS $(rss) MB, max RSS $(hwm) MB"
done
echo "run    max RSS (VmHWM) $(hwm) MB"
stop_run
}
if [ "$RUN_SIZE" -gt 0 ]; then run_scenario; fi

# big: `run` on 100 services x 2 pods beside an unrelated manifest of BIG_MB (and once without
# it, the baseline); one line appended to the big file, then the services edited at once (an
# unrelated change): the time from that edit to its configuration, peak and settled RSS.
big_edit() { # n -> ms from the services edit to its configuration
  local before t0
  before=$(successes)
  t0=$(now)
  sed -i "s/svc-00000\(\.e[0-9]*\)\?\.example\.com/svc-00000.e$1.example.com/" "$big_dir/services.json"
  changed() { [ "$(successes)" != "$before" ]; }
  until_deadline "$DEADLINE" changed
  ms "$t0" "$(now)"
}
big_scenario() { # format (json, yaml, none: the baseline), kind (deployment, pod)
  local flags=() t0 t1 took name what=$1
  big_dir=$D/big-$1-$2
  rm -rf "$big_dir"
  case $1 in
    json) flags=(-unrelated-mb "$BIG_MB" -unrelated-kind "$2") ;;
    yaml) flags=(-unrelated-mb "$BIG_MB" -unrelated-kind "$2" -unrelated-yaml) ;;
    yaml-list) flags=(-unrelated-mb "$BIG_MB" -unrelated-kind "$2" -unrelated-yaml-list) ;;
  esac
  [ "$1" = none ] || what="$1 of ${2}s"
  "$D/gen-scale" -services 100 -pods 2 -out "$big_dir" "${flags[@]}" >/dev/null
  name=$(ls "$big_dir" | grep unrelated || true)
  t0=$(now)
  start_run "$big_dir"
  until_deadline "$DEADLINE" ready
  t1=$(now)
  echo "big    $what: ready after $(ms "$t0" "$t1") ms; RSS $(rss) MB, max RSS $(hwm) MB"
  took=$(big_edit 1)
  echo "big    $what: an unrelated edit: configuration after $took ms; RSS $(rss) MB, max RSS $(hwm) MB"
  if [ -n "$name" ]; then
    first_peak=$(hwm)
    reset_hwm
    if [ "$1" = json ]; then echo >>"$big_dir/$name"; else echo "# appended" >>"$big_dir/$name"; fi
    took=$(big_edit 2)
    echo "big    $what: one line appended to $name, then an unrelated edit: configuration after $took ms; RSS $(rss) MB, peak since the first read's ($first_peak MB) $(hwm) MB"
    # One object of the big file changed (its first name), then an unrelated edit.
    reset_hwm
    sed -i '0,/app-000000/s//app-edited/' "$big_dir/$name"
    took=$(big_edit 3)
    echo "big    $what: one object of $name edited, then an unrelated edit: configuration after $took ms; RSS $(rss) MB, peak since $(hwm) MB"
  fi
  for n in 4 5 6; do took=$(big_edit "$n"); done
  echo "big    $what: 3 more unrelated edits, the last after $took ms; RSS $(rss) MB, max RSS $(hwm) MB"
  sleep 2 # the memory a sync freed is handed back after it (memory.Trim)
  echo "big    $what: settled: RSS $(rss) MB"
  stop_run
}
if [ "$BIG_MB" -gt 0 ]; then
  big_scenario none -
  for k in $BIG_KINDS; do
    for f in $BIG_FORMATS; do big_scenario "$f" "$k"; done
  done
fi
