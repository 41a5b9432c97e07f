package main

import (
	"flag"
	"testing"
)

func TestMaxFileSizeFlag(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.register(fs, "run")
	if o.maxFileSize != 128<<20 {
		t.Errorf("default %d, want 128MiB", o.maxFileSize)
	}
	if err := fs.Parse([]string{"--max-file-size", "1MiB"}); err != nil || o.maxFileSize != 1<<20 {
		t.Fatalf("--max-file-size 1MiB: %d, %v", o.maxFileSize, err)
	}
	if err := fs.Parse([]string{"--max-file-size", "0"}); err == nil {
		t.Fatal("--max-file-size 0 accepted")
	}
}
