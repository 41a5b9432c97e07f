package watcher

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// lockedBuffer is a log destination for several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestBigManifestChangeReadsOnlyIt: a big manifest of a kind nothing reads (Deployments), as a
// streamed JSON List and as multi-document YAML. Its objects are decoded once (strictly) and
// not kept: neither the cache nor the file's entry holds them. When one line is appended to it,
// that file alone is read again, and none of its objects is decoded again; when one of them
// changes, that one alone is.
func TestBigManifestChangeReadsOnlyIt(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			big := filepath.Join(dir, "unrelated."+format)
			size := int64(1 << 20)
			if format == "json" {
				size = 9 << 19 // over the streaming threshold (4 MiB)
			}
			writeUnrelated(t, big, size, format == "json")
			writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "a")})
			logs := &lockedBuffer{}
			f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{},
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				now:    func() time.Time { return time.Now().Add(time.Hour) }} // no file is racy
			const decodedIgnored = "ignoring an object that is not a ConfigMap"

			o := read(t, f)
			objects := logs.count(decodedIgnored)
			if !hasValue("services", "a")(o) || objects < 1000 || f.last.read != 2 {
				t.Fatalf("first read: %v, %d objects ignored, %d files read", names(o), objects, f.last.read)
			}
			if n := len(f.cache.entries); n > 1 {
				t.Errorf("the cache holds %d objects, want the services ConfigMap only", n)
			}
			if n := len(f.files[filepath.Base(big)].jobs); n != 0 {
				t.Errorf("the big file's entry keeps %d objects, want none", n)
			}

			appended := "\n"
			if format == "yaml" {
				appended = "# appended\n"
			}
			fh, err := os.OpenFile(big, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString(appended); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			o = read(t, f)
			again := logs.count(decodedIgnored) - objects
			if !hasValue("services", "a")(o) || f.last.read != 1 || f.last.parsed != 1 {
				t.Errorf("a line appended: %v, %d files read, %d parsed; want the big file alone", names(o), f.last.read, f.last.parsed)
			}
			// The YAML comment belongs to the last document: that one is converted again.
			if want := map[string]int{"json": 0, "yaml": 1}[format]; again != want {
				t.Errorf("a line appended: %d objects decoded again, want %d", again, want)
			}

			touched := time.Now().Add(time.Minute)
			if err := os.Chtimes(big, touched, touched); err != nil {
				t.Fatal(err)
			}
			before := logs.count(decodedIgnored)
			read(t, f)
			if n := logs.count(decodedIgnored) - before; n != 0 || f.last.read != 1 || f.last.parsed != 0 {
				t.Errorf("touched: %d files read, %d parsed, %d objects decoded again; want it read (hashed) only", f.last.read, f.last.parsed, n)
			}

			// One Deployment changed, keeping the file's size, then changed again, growing it.
			for _, image := range []string{"app:Z", "app:seven"} {
				b, err := os.ReadFile(big)
				if err != nil {
					t.Fatal(err)
				}
				changed := bytes.Replace(b, []byte("registry.example.com/app:7"), []byte("registry.example.com/"+image), 1)
				if bytes.Equal(changed, b) {
					t.Fatal("no Deployment changed")
				}
				if err := os.WriteFile(big, changed, 0o644); err != nil {
					t.Fatal(err)
				}
				before := logs.count(decodedIgnored)
				read(t, f)
				if n := logs.count(decodedIgnored) - before; n != 1 {
					t.Errorf("one Deployment changed (%s): %d objects decoded again, want 1", image, n)
				}
			}
			if got := logs.count("level=ERROR") + logs.count("level=WARN"); got != 0 {
				t.Errorf("%d warnings or errors logged", got)
			}
		})
	}
}
