package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
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

// TestDuplicateInUseSurvivesARestart: b.yaml's definition in use and a copy in a.yaml held,
// the choices the File gives OnChoices, kept as the sidecar keeps them (JSON), make a new File
// (a restarted sidecar, or diff --live) keep b.yaml's and hold a.yaml, though a.yaml sorts
// first; a copy made while no File ran is a newcomer too. Without them, a.yaml's is used.
func TestDuplicateInUseSurvivesARestart(t *testing.T) {
	const held = "File a.yaml line 1: ConfigMap lb/services is defined twice: first in b.yaml line 1"
	// running is a File read with b.yaml alone, then with the copy when copied: the choices
	// it kept last, as a restarted one reads them.
	running := func(t *testing.T, dir string, copied bool) *Choices {
		writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("services", "b")})
		var kept []byte
		f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), OnChoices: func(c Choices) error {
			var err error
			kept, err = json.Marshal(c)
			return err
		}}
		readWithErrors(t, f)
		if copied {
			writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("services", "a")})
			if o, errs := readWithErrors(t, f); !hasValue("services", "b")(o) || len(errs) != 1 || !strings.Contains(errs[0], held) {
				t.Fatalf("the copy appears: services %v, errors %q; want b.yaml's in use", names(o), errs)
			}
		}
		var c Choices
		if err := json.Unmarshal(kept, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	for _, tc := range []struct {
		name     string
		copied   bool // the copy is there while the first File runs (else it appears while none runs)
		remember bool
		want     string
	}{
		{"copied while running, restarted", true, true, "b"},
		{"copied while stopped, restarted", false, true, "b"},
		{"copied while running, nothing remembered", true, false, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := running(t, dir, tc.copied)
			writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("services", "a")})
			told := 0
			f := &File{Dir: dir, DefaultNamespace: "lb", Logger: testLogger(t), OnChoices: func(Choices) error { told++; return nil }}
			if tc.remember {
				f.Remembered = c
			}
			o, errs := readWithErrors(t, f)
			if !hasValue("services", tc.want)(o) || len(errs) != 1 {
				t.Fatalf("services %v, errors %q; want %s.yaml's in use and one error", names(o), errs, tc.want)
			}
			if tc.want == "b" && !strings.Contains(errs[0], held) {
				t.Errorf("error %q, want %q", errs[0], held)
			}
			if want := 0; tc.copied && tc.remember && told != want {
				t.Errorf("OnChoices called %d times with the choices remembered unchanged, want %d", told, want)
			}
			if o, _ := readWithErrors(t, f); !hasValue("services", tc.want)(o) {
				t.Errorf("read again: services %v, want %s.yaml's", names(o), tc.want)
			}
		})
	}
}

// TestDuplicateAfterABase: a File read after another (diff --base: the proposal read as a
// change of the base) keeps the base's definitions in use: the copy in a.yaml, new in the
// proposal, is held; an existing file that gains a definition is the newcomer too.
func TestDuplicateAfterABase(t *testing.T) {
	base, proposal := t.TempDir(), t.TempDir()
	writeFiles(t, base, map[string]string{"b.yaml": configMapYAML("services", "b"), "a-other.yaml": configMapYAML("other", "x")})
	writeFiles(t, proposal, map[string]string{"b.yaml": configMapYAML("services", "b"), "a-other.yaml": configMapYAML("other", "x") + "---\n" + configMapYAML("services", "a2"),
		"a.yaml": configMapYAML("services", "a")})
	b := &File{Dir: base, DefaultNamespace: "lb"}
	readWithErrors(t, b)
	f := &File{Dir: proposal, DefaultNamespace: "lb"}
	f.After(b)
	o, errs := readWithErrors(t, f)
	if !hasValue("services", "b")(o) || len(errs) != 2 {
		t.Errorf("services %v, errors %q; want b.yaml's in use, a.yaml and a-other.yaml held", names(o), errs)
	}
}

// TestChoicesTold: OnChoices hears the choices when they change, not at every read; when it
// fails, it is told again at the next read.
func TestChoicesTold(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("services", "b")})
	var told []Choices
	fail := false
	f := &File{Dir: dir, DefaultNamespace: "lb", OnChoices: func(c Choices) error {
		if fail {
			return errors.New("disk full")
		}
		told = append(told, c)
		return nil
	}}
	readWithErrors(t, f)
	readWithErrors(t, f)
	writeFiles(t, dir, map[string]string{"b.yaml": configMapYAML("services", "b2")})
	readWithErrors(t, f)
	fail = true
	writeFiles(t, dir, map[string]string{"a.yaml": configMapYAML("services", "a")})
	readWithErrors(t, f)
	fail = false
	readWithErrors(t, f)
	want := []Choices{
		{Files: []string{"b.yaml"}},
		{Kept: []KeptDefinition{{Kind: "ConfigMap", Namespace: "lb", Name: "services", File: "b.yaml"}}, Files: []string{"a.yaml", "b.yaml"}},
	}
	if !reflect.DeepEqual(told, want) {
		t.Errorf("told %+v, want %+v", told, want)
	}
}
