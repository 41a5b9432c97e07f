#!/usr/bin/env bash
# Runs the tests against every supported HAProxy version: all packages once with the first
# version (3.2 LTS, the images' default), then the packages whose tests run HAProxy (they import
# internal/haproxytest or internal/dataplanetest) again with each other version. A version runs
# by putting its bin/ first in PATH, so the tests, `haproxy -c` and the sidecar all run it, and
# HAPROXY_SIDECAR_HAPROXY_VERSION makes a test fail (not skip) when another one is found.
# Every version runs even when one fails; the summary says which.
#   usage: hack/test.sh [go test flags...]     (make test: -race -count=1 -timeout 30m)
#   env:   HAPROXY_VERSIONS ("2.6=PATH 3.0=PATH 3.2=PATH 3.4=PATH", default: hack/haproxy-versions.sh)
#          HAPROXY_TEST_VERSIONS (default "3.2 2.6 3.0 3.4": which ones, the first runs everything)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
versions=${HAPROXY_VERSIONS:-$(hack/haproxy-versions.sh)}
order=${HAPROXY_TEST_VERSIONS:-3.2 2.6 3.0 3.4}

path_of() { # branch -> haproxy path from $versions
  local kv
  for kv in $versions; do
    if [ "${kv%%=*}" = "$1" ]; then echo "${kv#*=}"; return; fi
  done
}

haproxy_pkgs=$($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  awk '/\/internal\/(haproxytest|dataplanetest)( |$)/ {print $1}')

summary=() status=0 first=1
for branch in $order; do
  bin=$(path_of "$branch")
  if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "test.sh: HAProxy $branch: no binary in HAPROXY_VERSIONS ($versions)" >&2
    summary+=("HAProxy $branch: MISSING"); status=1; first=0; continue
  fi
  full=$("$bin" -v | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p')
  if [ $first = 1 ]; then pkgs=./...; what="all packages"; else pkgs=$haproxy_pkgs; what="the HAProxy packages"; fi
  first=0
  echo "=== HAProxy $full ($bin): $what" >&2
  start=$(date +%s)
  if PATH="$(dirname "$bin"):$PATH" HAPROXY_SIDECAR_HAPROXY_VERSION=$branch $GO test "$@" $pkgs; then
    summary+=("HAProxy $full: ok ($what, $(($(date +%s) - start))s)")
  else
    summary+=("HAProxy $full: FAIL ($what, $(($(date +%s) - start))s)"); status=1
  fi
done
printf '%s\n' "${summary[@]}" >&2
exit $status
