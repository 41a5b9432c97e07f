package etcdtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinDir(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"etcd": 0o755, "kubectl": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name            string
		env, fallback   string
		names           []string
		want, wantError string
	}{
		{"from the environment", dir, "/nonexistent", []string{"etcd"}, dir, ""},
		{"fallback when unset", "", dir, []string{"etcd"}, dir, ""},
		{"the environment wins", "/nonexistent", dir, []string{"etcd"}, "", "not found in /nonexistent"},
		{"missing", dir, "", []string{"etcd", "kube-apiserver"}, "", "kube-apiserver not found"},
		{"not executable", dir, "", []string{"kubectl"}, "", "not executable"},
		{"nowhere", "", "", []string{"etcd"}, "", "no directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findBinDir(tc.env, tc.fallback, tc.names)
			if got != tc.want || (tc.wantError == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantError)) {
				t.Fatalf("findBinDir = %q, %v; want %q, error containing %q", got, err, tc.want, tc.wantError)
			}
		})
	}
}
