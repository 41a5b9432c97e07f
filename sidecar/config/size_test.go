package config

import (
	"flag"
	"testing"
)

func TestMaxFileSizeFlag(t *testing.T) {
	var o Source
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.register(fs)
	if o.MaxFileSize != 128<<20 {
		t.Errorf("default %d, want 128MiB", o.MaxFileSize)
	}
	if err := fs.Parse([]string{"--max-file-size", "1MiB"}); err != nil || o.MaxFileSize != 1<<20 {
		t.Fatalf("--max-file-size 1MiB: %d, %v", o.MaxFileSize, err)
	}
	if err := fs.Parse([]string{"--max-file-size", "0"}); err == nil {
		t.Fatal("--max-file-size 0 accepted")
	}
}
