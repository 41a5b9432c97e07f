package cfgparse

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse10k: reading 10,000 backends x 10 servers from scratch (the first plan, and
// what ParseAfter costs when nothing can be kept).
func BenchmarkParse10k(b *testing.B) {
	text := config10k("inter 2s")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(text); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseAfter10kDefaultsChanged: what every backend inherits changed, so ParseAfter
// reads all of them again (each from a copy of its own): its worst case against Parse.
func BenchmarkParseAfter10kDefaultsChanged(b *testing.B) {
	prev, err := Parse(config10k("inter 2s"))
	if err != nil {
		b.Fatal(err)
	}
	text := config10k("inter 3s")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAfter(prev, text); err != nil {
			b.Fatal(err)
		}
	}
}

func config10k(inter string) []byte {
	var s strings.Builder
	s.WriteString("global\n    maxconn 50000\ndefaults\n    mode http\n    default-server " + inter + " fall 3 rise 2\nfrontend fe\n    bind :80\n")
	for i := range 10000 {
		fmt.Fprintf(&s, "\nbackend be_%d\n    balance roundrobin\n", i)
		for j := range 10 {
			fmt.Fprintf(&s, "    server pod-%d-%d 10.%d.%d.%d:8080 check\n", i, j, i/250, i%250, j+1)
		}
	}
	return []byte(s.String())
}
