#!/usr/bin/env bash
# Prints the sidecar's version: `git describe --tags --always --dirty` (a leading v dropped;
# at a release, the tag v$(cat VERSION)), else the VERSION file (a source tree without git),
# else 0.0.0-dev. The Makefile builds the binary and the image with it.
set -euo pipefail
cd "$(dirname "$0")/.."
if v=$(git describe --tags --always --dirty 2>/dev/null) && [ -n "$v" ]; then
  echo "${v#v}"
elif [ -s VERSION ]; then
  tr -d '[:space:]' <VERSION; echo
else
  echo 0.0.0-dev
fi
