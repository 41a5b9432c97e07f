package watcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// readWithErrors calls Objects and returns the objects with the input errors' messages (any other
// error fails the test).
func readWithErrors(t *testing.T, f *File) (*snapshot.Objects, []string) {
	t.Helper()
	o, err := f.Objects(context.Background())
	if err == nil {
		return o, nil
	}
	var ie *snapshot.InputError
	if o == nil || !errors.As(err, &ie) {
		t.Fatalf("read: %v", err)
	}
	var msgs []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			msgs = append(msgs, e.Error())
		}
	} else {
		msgs = append(msgs, err.Error())
	}
	return o, msgs
}

// TestDuplicateNewcomerIsHeld: a copy of a manifest under a name that sorts first, with one
// value changed, does not take the object over: the original's definition stays in use, the
// copy is the error (naming both files), edits to the original go live; read after read, and
// with pods as with ConfigMaps. Deleting the original leaves the copy the only definition.
func TestDuplicateNewcomerIsHeld(t *testing.T) {
	for _, conv := range []*snapshot.PodConverter{nil, {}} {
		name := "typed pods"
		if conv != nil {
			name = "converted pods"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			pods := func(ip string) string {
				return `{"apiVersion":"v1","kind":"List","items":[` + podJSON("web-1", ip, true) + `]}`
			}
			writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "original"), "pods.json": pods("10.0.0.1")})
			f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), PodConverter: conv}
			if o, errs := readWithErrors(t, f); errs != nil || !hasValue("services", "original")(o) {
				t.Fatalf("first read: %v %v", names(o), errs)
			}

			writeFiles(t, dir, map[string]string{"a-copy.yaml": configMapYAML("services", "copy"), "a-pods.json": pods("10.0.0.9")})
			check := func(what, want string) {
				t.Helper()
				o, errs := readWithErrors(t, f)
				if !hasValue("services", want)(o) {
					v, _ := value(o, "services")
					t.Errorf("%s: services is %q, want %q", what, v, want)
				}
				if ip := podIP(o, "web-1"); ip != "10.0.0.1" {
					t.Errorf("%s: pod web-1 has IP %q, want the original's 10.0.0.1", what, ip)
				}
				for _, want := range []string{
					"File a-copy.yaml line 1: ConfigMap lb/services is defined twice: first in services.yaml line 1",
					"File a-pods.json line 1: Pod shop/web-1 is defined twice: first in pods.json line 1",
				} {
					if !containsOne(errs, want) {
						t.Errorf("%s: errors %q, want one with %q", what, errs, want)
					}
				}
				if len(errs) != 2 {
					t.Errorf("%s: %d errors, want 2: %q", what, len(errs), errs)
				}
			}
			check("the copy appears", "original")
			check("read again", "original")
			writeFiles(t, dir, map[string]string{"services.yaml": configMapYAML("services", "edited")})
			check("the original edited", "edited")
			writeFiles(t, dir, map[string]string{"a-copy.yaml": configMapYAML("services", "copy edited")})
			check("the copy edited", "edited")

			for _, p := range []string{"services.yaml", "pods.json"} {
				if err := os.Remove(filepath.Join(dir, p)); err != nil {
					t.Fatal(err)
				}
			}
			o, errs := readWithErrors(t, f)
			if errs != nil || !hasValue("services", "copy edited")(o) || podIP(o, "web-1") != "10.0.0.9" {
				t.Errorf("the originals removed: errors %q, services %v, pod IP %q; want the copies in use", errs, names(o), podIP(o, "web-1"))
			}
		})
	}
}

// TestDuplicateFirstReadKeepsTheFirstFile: with nothing read before (a start), the definition
// kept is the first in the order of the files, as before.
func TestDuplicateFirstReadKeepsTheFirstFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("services", "b"), "a.yaml": configMapYAML("services", "a")})
	o, errs := readWithErrors(t, &File{Dir: dir, DefaultNamespace: "lb"})
	if !hasValue("services", "a")(o) || len(errs) != 1 || !strings.Contains(errs[0], "File b.yaml line 1: ConfigMap lb/services is defined twice: first in a.yaml line 1") {
		t.Errorf("services %v, errors %q; want a.yaml's kept and b.yaml's reported", names(o), errs)
	}
}

func podIP(o *snapshot.Objects, name string) string {
	for _, p := range o.Pods {
		if p.Name == name {
			return p.Status.PodIP
		}
	}
	for _, p := range o.ConvertedPods {
		if p.Name() == name && p.Object() != nil {
			ip, _ := p.Object().Map()["status"].(map[string]any)["podIP"].(string)
			return ip
		}
	}
	return ""
}

func containsOne(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
