# Sourced by hack/testbins.sh and hack/conformance-bins.sh: builds commands of k8s.io/kubernetes
# at one release from the Go module proxy.
#   k8s_build OUT VERSION CMD...     # k8s_build "$out" 1.36.3 kube-apiserver kubectl
# builds k8s.io/kubernetes/cmd/CMD for each CMD into OUT, stamped with the version (what
# `--version` and the API server's /version say). It works in a temporary module it removes.

k8s_build() {
  local out k8s=$2
  out=$(cd "$1" && pwd) # the build runs in another directory
  shift 2
  local work
  work=$(mktemp -d)
  # A subshell, so that its directory and the trap stay its own.
  (
    trap 'rm -rf "$work"' EXIT
    cd "$work"
    # k8s.io/kubernetes pins its staging modules (k8s.io/api, ...) to v0.0.0 with replace
    # directives to ./staging; a consumer must replace each with the release.
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$k8s" >/dev/null
    local modfile staging
    modfile="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$k8s.mod"
    staging="v0.${k8s#1.}"
    {
      printf 'module k8sbuild\n\ngo 1.26\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$k8s"
      sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print $1}' |
        grep -v -e sample-cli-plugin -e sample-controller |
        while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
      printf ')\n'
    } >go.mod
    {
      printf 'package tools\n\nimport (\n'
      for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
      printf ')\n'
    } >tools.go
    go mod tidy >/dev/null 2>&1
    local ldflags="-s -w" p c
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $p.gitVersion=v$k8s -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$k8s" | cut -d. -f2)"
    done
    for c in "$@"; do
      go build -trimpath -ldflags="$ldflags" -o "$out/$c" "k8s.io/kubernetes/cmd/$c"
    done
  )
}
