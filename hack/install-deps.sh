#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine: HAProxy (2.6 from Debian),
# socat, iproute2 (the conformance harness's network namespace), and python3-jinja2 (the reference the template engine is tested against). Idempotent;
# uses sudo when not root.
set -euo pipefail
need=()
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
command -v socat >/dev/null 2>&1 || need+=(socat)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1 || need+=(python3-jinja2)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${need[*]} with apt (about a minute on a fresh machine)..." >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian's package may start a system HAProxy on :80; the tests and the demo run their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet haproxy 2>/dev/null; then
  $sudo systemctl stop haproxy || true
fi
