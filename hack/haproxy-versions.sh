#!/usr/bin/env bash
# Provides the HAProxy versions the tests run against and prints them on one line as
# "2.6=PATH 3.0=PATH 3.2=PATH 3.4=PATH" (the form HAPROXY_VERSIONS takes, see hack/test.sh):
#   2.6  Debian bookworm's package (hack/install-deps.sh installs it)
#   3.0  LTS, built from Debian trixie's upstream source tarball (about a minute on 2 cores)
#   3.2  LTS, Debian forky's binary package with the newer glibc/OpenSSL it needs extracted into
#        a private root, the binary pointed at them with patchelf
#   3.4  LTS, Debian experimental's binary package (its source package is not served), run the
#        same way on forky's libraries
# Each version's directory under the cache holds only bin/haproxy, so putting that bin first in
# PATH makes every `haproxy` the tests and the sidecar run that version.
#
# trixie, forky and experimental are read through a private apt configuration (its own sources, pinned to
# priority 1, and its own lists in a temporary directory): the system's apt sources are not
# changed, so nothing is ever installed from those suites and later `apt-get install` of bookworm
# packages behaves as before. Whichever 3.0/3.2/3.4 the archive has is taken once and cached outside
# the clone; later runs reuse it instantly (HAPROXY_VERSIONS_REFRESH=1 asks the archive again).
#   usage: hack/haproxy-versions.sh        env: TESTBIN_CACHE, HAPROXY_VERSIONS_REFRESH
set -euo pipefail
cache=${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-sidecar}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
log() { echo "haproxy-versions: $*" >&2; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# version BIN: HAProxy's own version string ("3.2.26-1", "3.0.11"), empty if it does not run.
version() { "$1" -v 2>/dev/null | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p' | head -1; }

# cached BRANCH: the newest cached bin/haproxy of that branch that runs, if any.
cached() {
  local d
  for d in $(ls -d "$cache/haproxy-$1".*/ 2>/dev/null | sort -rV); do
    if [ -n "$(version "$d/bin/haproxy")" ]; then echo "${d%/}/bin/haproxy"; return; fi
  done
}

# apt_install PKG...: the bookworm packages the builds need, only those missing.
apt_install() {
  local need=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return
  log "installing from bookworm: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# A private apt that sees only trixie's sources, forky's and experimental's packages, pinned
# low.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
privapt_ready=""
privapt_init() {
  if [ -z "$privapt_ready" ]; then
    mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/apt/empty"
    cat >"$work/apt/sources.list" <<EOF
deb-src [signed-by=$keyring] $mirror trixie main
deb [signed-by=$keyring] $mirror forky main
deb [signed-by=$keyring] $mirror experimental main
EOF
    printf 'Package: *\nPin: release n=%s\nPin-Priority: 1\n\n' trixie forky experimental \
      >"$work/apt/preferences"
    privapt_ready=1
    log "reading trixie's sources, forky's and experimental's packages (private apt lists in $work)"
    privapt apt-get update -qq >/dev/null
  fi
}
privapt() {
  local cmd=$1; shift
  "$cmd" -o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts="$work/apt/empty" \
    -o Dir::Etc::Preferences="$work/apt/preferences" -o Dir::Etc::PreferencesParts="$work/apt/empty" \
    -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache" \
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root \
    -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false "$@"
}
apt_() { privapt apt-get "$@"; }

# 2.6: the system's haproxy (Debian bookworm's package).
provide_26() {
  local sys v out
  sys=/usr/sbin/haproxy
  [ -x "$sys" ] || sys=$(command -v haproxy || echo "$sys")
  v=$(version "$sys")
  case "$v" in
    2.6.*) ;;
    *) log "HAProxy 2.6 expected at $sys (Debian bookworm's package, hack/install-deps.sh), found '${v:-nothing}'"; return 1 ;;
  esac
  out="$cache/haproxy-$v/bin"
  if [ "$(readlink "$out/haproxy" 2>/dev/null)" != "$sys" ]; then
    mkdir -p "$out"
    ln -sfn "$sys" "$out/haproxy"
  fi
  bin="$out/haproxy"
}

# 3.0: build the upstream tarball trixie's source package carries (Debian's patches are not
# applied: the tests want HAProxy's own behaviour of that branch).
provide_30() {
  local have tarball v out src
  have=$(cached 3.0)
  if [ -n "$have" ] && [ -z "${HAPROXY_VERSIONS_REFRESH:-}" ]; then bin="$have"; return; fi
  apt_install gcc make libc6-dev libssl-dev libpcre2-dev liblua5.4-dev
  privapt_init
  mkdir -p "$work/src" && cd "$work/src"
  # The .dsc or the Debian tarball may fail to download: the upstream tarball is all we need.
  apt_ source --download-only -qq haproxy/trixie >/dev/null 2>&1 || true
  tarball=$(ls haproxy_3.0.*.orig.tar.gz 2>/dev/null | sort -V | tail -1)
  if [ -z "$tarball" ]; then
    log "trixie's haproxy_3.0.*.orig.tar.gz could not be downloaded (apt-get source haproxy/trixie)"; return 1
  fi
  v=${tarball#haproxy_}; v=${v%.orig.tar.gz}
  out="$cache/haproxy-$v"
  if [ -n "$(version "$out/bin/haproxy")" ]; then bin="$out/bin/haproxy"; return; fi
  log "building HAProxy $v from $tarball (about a minute)"
  tar xzf "$tarball"
  make -C "haproxy-$v" -j"$(nproc)" TARGET=linux-glibc USE_OPENSSL=1 USE_PCRE2=1 USE_LUA=1 \
    LUA_INC=/usr/include/lua5.4 LUA_LIB_NAME=lua5.4 USE_PROMEX=1 >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log" >&2; log "building HAProxy $v failed"; return 1; }
  rm -rf "$out" && mkdir -p "$out/bin"
  install -m 755 "haproxy-$v/haproxy" "$out/bin/haproxy.tmp"
  mv "$out/bin/haproxy.tmp" "$out/bin/haproxy"
  bin="$out/bin/haproxy"
}

# provide_deb BRANCH SUITE: SUITE's binary package of that branch (3.2: forky, 3.4:
# experimental), run on bookworm with forky's libraries from a private root.
forky_libs=(libc6 libssl3t64 liblua5.4-0 libjemalloc2 libpcre2-8-0 libcrypt1 libopentracing1
  libopentracing-c-wrapper0t64 libstdc++6 libgcc-s1 zlib1g)
provide_deb() {
  local branch=$1 suite=$2 have v out deb interp libdir p
  have=$(cached "$branch")
  if [ -n "$have" ] && [ -z "${HAPROXY_VERSIONS_REFRESH:-}" ]; then bin="$have"; return; fi
  apt_install patchelf
  privapt_init
  v=$(privapt apt-cache show "haproxy/$suite" 2>/dev/null | sed -n 's/^Version: //p' | sort -rV | head -1)
  case "$v" in
    "$branch".*) ;;
    *) log "$suite's haproxy is '${v:-absent}', not a $branch"; return 1 ;;
  esac
  out="$cache/haproxy-$v"
  if [ -n "$(version "$out/bin/haproxy")" ]; then bin="$out/bin/haproxy"; return; fi
  log "installing HAProxy $v from $suite into $out"
  mkdir -p "$work/debs-$branch" && cd "$work/debs-$branch"
  apt_ download -qq "haproxy/$suite" "${forky_libs[@]/%//forky}" >/dev/null
  # The rpath below is absolute: extract straight into the final place; bin/haproxy comes last,
  # so a half-done directory is never taken as a cached version.
  rm -rf "$out" && mkdir -p "$out/root" "$out/bin"
  for deb in ./*.deb; do dpkg-deb -x "$deb" "$out/root"; done
  interp=$(patchelf --print-interpreter "$out/root/usr/sbin/haproxy")
  libdir=$(dirname "$(find "$out/root" -name "$(basename "$interp")" | head -1)")
  p="$out/bin/haproxy.tmp"
  cp "$out/root/usr/sbin/haproxy" "$p"
  patchelf --force-rpath --set-interpreter "$libdir/$(basename "$interp")" \
    --set-rpath "$out/root/usr/lib/$(basename "$libdir"):$out/root/lib/$(basename "$libdir")" "$p"
  if "$libdir/$(basename "$interp")" --list "$p" | grep -q 'not found'; then
    "$libdir/$(basename "$interp")" --list "$p" >&2
    log "HAProxy $v misses libraries: add them to forky_libs"; return 1
  fi
  mv "$p" "$out/bin/haproxy"
  [ -n "$(version "$out/bin/haproxy")" ] || { log "HAProxy $v does not run: $("$out/bin/haproxy" -v 2>&1 | head -3)"; return 1; }
  bin="$out/bin/haproxy"
}

mkdir -p "$cache"
# Each provide_ sets $bin (no command substitution: errexit would not stop a failure inside one).
bin=""; provide_26; v26=$bin
bin=""; provide_30; v30=$bin
bin=""; provide_deb 3.2 forky; v32=$bin
bin=""; provide_deb 3.4 experimental; v34=$bin
echo "2.6=$v26 3.0=$v30 3.2=$v32 3.4=$v34"
