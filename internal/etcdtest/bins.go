package etcdtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Environment variables that say where the test binaries are and whether they are required.
const (
	// AssetsEnv names the directory holding etcd, kube-apiserver and kubectl, as for
	// controller-runtime's envtest (the Makefile sets it to the output of hack/testbins.sh).
	AssetsEnv = "KUBEBUILDER_ASSETS"
	// RequireEnv=1 (set by `make test` and CI) turns a missing binary into a test failure
	// instead of a skip.
	RequireEnv = "HAPROXY_SIDECAR_REQUIRE_TESTBINS"
)

// DefaultAssetsDir is where hack/testbins.sh caches the binaries when run with its defaults:
// ${TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/haproxy-sidecar}/k8s-$K8S_VERSION-etcd-$ETCD_VERSION.
func DefaultAssetsDir() string {
	cache := os.Getenv("TESTBIN_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "haproxy-sidecar")
	}
	k8s, etcd := os.Getenv("K8S_VERSION"), os.Getenv("ETCD_VERSION")
	if k8s == "" {
		k8s = "1.36.3"
	}
	if etcd == "" {
		etcd = "3.6.8"
	}
	return filepath.Join(cache, "k8s-"+k8s+"-etcd-"+etcd)
}

// BinDir returns the directory that holds every named executable: $KUBEBUILDER_ASSETS, or
// DefaultAssetsDir when that is unset. It skips the test under `go test -short`, and when a
// binary is missing it skips (or fails, when HAPROXY_SIDECAR_REQUIRE_TESTBINS=1) with a
// message telling how to build them with hack/testbins.sh.
func BinDir(t testing.TB, names ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping a test that runs real etcd/kube-apiserver processes under -short")
	}
	dir, err := findBinDir(os.Getenv(AssetsEnv), DefaultAssetsDir(), names)
	if err == nil {
		return dir
	}
	msg := fmt.Sprintf("%v; build them with `hack/testbins.sh` and set %s=$(hack/testbins.sh) (when %s is unset, %s is searched)",
		err, AssetsEnv, AssetsEnv, DefaultAssetsDir())
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1: test binaries are required)", msg, RequireEnv)
	}
	t.Skip(msg)
	return ""
}

func findBinDir(fromEnv, fallback string, names []string) (string, error) {
	dir := fromEnv
	if dir == "" {
		dir = fallback
	}
	if dir == "" {
		return "", errors.New("no directory for the test binaries")
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("test binary %s not found in %s: %w", n, dir, err)
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("test binary %s in %s is not executable", n, dir)
		}
	}
	return dir, nil
}
