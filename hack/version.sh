#!/usr/bin/env bash
# Prints the sidecar's version: the VERSION file, the release version's one place. The image
# `make image` builds is tagged with it, and the chart's appVersion, examples/kubernetes and
# docs/kubernetes.md name it (make set-version writes them all), so that what is built is what
# `helm install` and `kubectl apply` pull. The commit comes with it as the revision (make: git
# rev-parse HEAD, -dirty for uncommitted changes). A release tag on HEAD must be v + VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
v=0.0.0-dev
if [ -s VERSION ]; then
  v=$(tr -d '[:space:]' <VERSION)
fi
for tag in $(git tag --points-at HEAD 'v[0-9]*' 2>/dev/null); do
  if [ "$tag" != "v$v" ]; then
    echo "hack/version.sh: HEAD is tagged $tag but VERSION says $v (make set-version V=${tag#v})" >&2
    exit 1
  fi
done
echo "$v"
