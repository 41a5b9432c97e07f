package watcher

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// writeUnrelated writes an unrelated manifest of about size bytes in the directory: a
// multi-document YAML file (json false) or a JSON List (`kubectl get -o json`) of
// Deployments, a kind the sidecar decodes and ignores.
func writeUnrelated(tb testing.TB, path string, size int64, json bool) {
	tb.Helper()
	fh, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	var n int64
	if json {
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"List","items":[`)
	}
	for i := 0; n < size; i++ {
		var k int
		if json {
			if i > 0 {
				w.WriteByte(',')
			}
			k, _ = fmt.Fprintf(w, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app-%06d","namespace":"other","labels":{"app":"app-%06d","team":"platform","tier":"backend"}},`+
				`"spec":{"replicas":3,"selector":{"matchLabels":{"app":"app-%06d"}},"template":{"metadata":{"labels":{"app":"app-%06d"}},"spec":{"containers":[{"name":"app",`+
				`"image":"registry.example.com/app:%d","ports":[{"containerPort":8080,"name":"http"}],"env":[{"name":"MODE","value":"production"},{"name":"LOG_LEVEL","value":"info"}],`+
				`"resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":"http"}}}]}}}}`,
				i, i, i, i, i)
		} else {
			k, _ = fmt.Fprintf(w, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%06d
  namespace: other
  labels: {app: app-%06d, team: platform, tier: backend}
spec:
  replicas: 3
  selector:
    matchLabels: {app: app-%06d}
  template:
    metadata:
      labels: {app: app-%06d}
    spec:
      containers:
      - name: app
        image: registry.example.com/app:%d
        ports: [{containerPort: 8080, name: http}]
        env:
        - {name: MODE, value: production}
        - {name: LOG_LEVEL, value: info}
        resources:
          requests: {cpu: 100m, memory: 128Mi}
          limits: {cpu: "1", memory: 512Mi}
        readinessProbe:
          httpGet: {path: /healthz, port: http}
`, i, i, i, i, i)
		}
		n += int64(k)
	}
	if json {
		fmt.Fprint(w, "]}\n")
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkEditBesideLargeManifest: one edit of the services ConfigMap, then Objects, in a
// directory that also holds an unrelated manifest of 100 MB (issue 10: every edit took 11-20 s
// when every file was parsed again). UNRELATED_MB sets the size. docs/performance.md has the
// numbers.
func BenchmarkEditBesideLargeManifest(b *testing.B) {
	mb := int64(100)
	if v := os.Getenv("UNRELATED_MB"); v != "" {
		fmt.Sscan(v, &mb)
	}
	for _, format := range []string{"json", "yaml"} {
		b.Run(fmt.Sprintf("unrelated=%dMB-%s", mb, format), func(b *testing.B) {
			dir := b.TempDir()
			writeUnrelated(b, filepath.Join(dir, "unrelated."+format), mb<<20, format == "json")
			services := filepath.Join(dir, "services.yaml")
			edit := func(i int) {
				if err := os.WriteFile(services, []byte(configMapYAML("services", fmt.Sprintf(`{"namespace":"web","selector":{"app":"web"},"hostnames":["web%d.example.com"]}`, i))), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			edit(0)
			f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, MaxFileSize: -1}
			start := time.Now()
			if _, err := f.Objects(context.Background()); err != nil {
				b.Fatal(err)
			}
			first := time.Since(start)
			// The file was read within racyMargin of its writing: the next read reads it again
			// (and hashes it, without parsing it); the reads after that do not.
			start = time.Now()
			if _, err := f.Objects(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Logf("first read: %v; the next one (the big file read again, not parsed): %v", first, time.Since(start))
			for i := 0; b.Loop(); i++ {
				edit(i + 1)
				o, err := f.Objects(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if v, _ := value(o, "services"); v == "" {
					b.Fatal("no services")
				}
			}
		})
	}
}
