package dataplane

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts.json")
	s, err := openState(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.get("https://lb1:5555/v3"); ok {
		t.Fatal("a host known before anything was recorded")
	}
	want := hostState{Hash: "abc", Version: 7}
	if err := s.set("https://lb1:5555/v3", want); err != nil {
		t.Fatal(err)
	}
	if err := s.set("https://lb2:5555/v3", hostState{Hash: "def", Version: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.set("https://lb2:5555/v3", hostState{}); err != nil {
		t.Fatal(err)
	}
	again, err := openState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := again.get("https://lb1:5555/v3"); !ok || got != want {
		t.Errorf("after reopening: %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := again.get("https://lb2:5555/v3"); ok {
		t.Error("a forgotten host is still known after reopening")
	}

	t.Run("a damaged file is an empty state", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openState(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.get("https://lb1:5555/v3"); ok {
			t.Error("a host known from a damaged file")
		}
	})
	t.Run("no path: kept in memory only", func(t *testing.T) {
		s, err := openState("")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.set("h", want); err != nil {
			t.Fatal(err)
		}
		if got, ok := s.get("h"); !ok || got != want {
			t.Errorf("got %+v, %v", got, ok)
		}
	})
}
