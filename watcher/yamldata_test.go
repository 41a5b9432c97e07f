package watcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// filler is n data keys of one line each, enough to make a document big (dataSplitMin).
func filler(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  svc-%04d: '{\"namespace\": \"demo\", \"selector\": {\"app\": \"svc-%04d\"}, \"ports\": [8080]}'\n", i, i)
	}
	return b.String()
}

// twoReaders read a directory as the sidecar does (with the cache: big data read key by key)
// and as a read without the cache does (every document converted whole), each with its own
// history (the last good version of a bad file).
type twoReaders struct{ cached, whole *File }

func newTwoReaders(dir string) twoReaders {
	return twoReaders{
		cached: &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}},
		whole:  &File{Dir: dir, DefaultNamespace: "lb"},
	}
}

func (r twoReaders) read() (got, want *snapshot.Objects, gotErr, wantErr error) {
	got, gotErr = r.cached.Objects(context.Background())
	want, wantErr = r.whole.Objects(context.Background())
	return got, want, gotErr, wantErr
}

// sameRead fails the test unless both reads give the same ConfigMaps, Secrets, origins and
// errors.
func sameRead(t *testing.T, what string, got, want *snapshot.Objects, gotErr, wantErr error) {
	t.Helper()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: error %v, whole: %v", what, gotErr, wantErr)
	}
	if got == nil || want == nil {
		if got != want {
			t.Fatalf("%s: objects %v, whole: %v", what, got, want)
		}
		return
	}
	data := func(o *snapshot.Objects) map[string]any {
		m := map[string]any{}
		for _, cm := range o.ConfigMaps {
			m["cm/"+cm.Namespace+"/"+cm.Name] = cm.Data
			m["cmb/"+cm.Namespace+"/"+cm.Name] = cm.BinaryData
		}
		for _, s := range o.Secrets {
			m["s/"+s.Namespace+"/"+s.Name] = s.Data
		}
		return m
	}
	if g, w := data(got), data(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: data differs from the whole conversion's:\n%v\n%v", what, g, w)
	}
	if !reflect.DeepEqual(got.Origins, want.Origins) {
		for ref, og := range want.Origins {
			if !reflect.DeepEqual(got.Origins[ref], og) {
				t.Errorf("%s: %v at %#v, whole: %#v", what, ref, got.Origins[ref], og)
			}
		}
		t.Fatalf("%s: origins differ from the whole conversion's (%d, %d)", what, len(got.Origins), len(want.Origins))
	}
}

// TestBigDataReadKeyByKeyAsWhole: a big ConfigMap or Secret read key by key gives what its
// conversion as a whole gives (values, positions of each key, errors), in every layout; those
// the cut cannot take are converted whole.
func TestBigDataReadKeyByKeyAsWhole(t *testing.T) {
	fill := filler(200)
	styles := `  literal: |
    line one
      indented here
  strip: |-

    after an empty line
  explicit: |2
       three spaces
  keep: |+
    kept

  folded: >
    folded one
    folded two

    next paragraph
      more indented
    back
  quoted: "a
    b"
  single: 'single
    two'
  plain: plain
    continued
  # a comment between keys
  "quoted key": x
  'single key': y
  yes: no
  empty:
  accented: é
`
	cases := []struct {
		name  string
		doc   string
		split bool // read key by key
	}{
		{"every style", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + fill + styles, true},
		{"comments and blank lines", "# head\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: lb\ndata: # the services\n  # first\n\n" + fill + "\n  # last\n\n", true},
		{"data first", "data:\n" + styles + fill + "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\n", true},
		{"deeper indentation", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + strings.ReplaceAll(fill, "  svc-", "    svc-"), true},
		{"a Secret", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: lb}\ntype: Opaque\ndata:\n" + strings.ReplaceAll(filler(300), "'{", "'e30=") + "  b64: |\n    QUJD\n    REVG\n", true},
		{"a key twice", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + fill + "  svc-0001: again\n", false},
		{"a bad value", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + fill + "  bad: [1, 2]\n", true},
		{"a bad line", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + fill + "  bad: 'unclosed\n", false},
		{"stringData too", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: lb}\nstringData:\n  svc-0001: s\ndata:\n" + strings.ReplaceAll(fill, "'{", "'e30="), false},
		{"an anchor", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n  a: &x one\n  b: *x\n" + fill, false},
		{"a merge key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n  <<: {m: n}\n" + fill, false},
		{"flow data", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata: {a: b, c: d}\nextra:\n" + fill, false},
		{"a comment at column 0 inside", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n  first: x\n# comment\n" + fill, false},
		{"another kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: lb}\ndata:\n" + fill, false},
		{"a document end", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n" + fill + "...\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.doc) < dataSplitMin {
				t.Fatalf("the document is %d bytes: too small to be cut", len(c.doc))
			}
			dir := t.TempDir()
			other := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: small, namespace: lb}\ndata: {k: v}\n"
			if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(other+"---\n"+c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			r := newTwoReaders(dir)
			got, want, gotErr, wantErr := r.read()
			sameRead(t, "first read", got, want, gotErr, wantErr)
			if split := r.cached.work.byKey == 1; split != c.split {
				t.Errorf("read key by key: %v (%d keys converted), want %v", split, r.cached.work.dataKeys, c.split)
			}
		})
	}
}

// TestBigDataEditConvertsTheKeysItChanged: after an edit of a services ConfigMap of 1,000
// keys, a read converts the keys whose lines changed, and gives what a whole read gives
// (positions of the keys after an inserted one moved).
func TestBigDataEditConvertsTheKeysItChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	head := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: services, namespace: lb}\ndata:\n"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fill := filler(1000)
	r := newTwoReaders(dir)
	steps := []struct {
		name string
		body string
		keys int // data keys converted
	}{
		{"first read", fill, 1000},
		{"one value changed", strings.Replace(fill, "svc-0500\"}", "svc-0500\", \"tier\": \"web\"}", 1), 1},
		{"a key inserted", strings.Replace(fill, "  svc-0100:", "  new: |\n    two\n    lines\n  svc-0100:", 1), 2},
		{"a key removed", strings.Replace(fill, "  svc-0100:", "  svc-0100-gone:", 1), 1},
		{"unchanged but rewritten", strings.Replace(fill, "  svc-0100:", "  svc-0100-gone:", 1), 0},
		// A block scalar's last lines end the document, then the same lines in the middle.
		{"back to the first", fill, 1},
		// The same lines at the end of the document and in the middle: a block scalar's
		// positions differ (and the last key's lines are converted again).
		{"a folded value last", fill + "  folded: >\n    one\n    two\n", 2},
		{"the same lines in the middle", strings.Replace(fill, "  svc-0100:", "  folded: >\n    one\n    two\n  svc-0100:", 1), 2},
	}
	for _, s := range steps {
		write(s.body)
		got, want, gotErr, wantErr := r.read()
		sameRead(t, s.name, got, want, gotErr, wantErr)
		if r.cached.work.dataKeys != s.keys {
			t.Errorf("%s: %d keys converted, want %d", s.name, r.cached.work.dataKeys, s.keys)
		}
	}
}

// TestBigDataRandomEdits: a long random sequence of edits of a big ConfigMap (values in every
// style changed, keys added, removed and moved, comments, a bad key now and then), each read
// through the cache as a whole read gives it.
func TestBigDataRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 25))
	values := []string{
		"'{\"a\": %d}'",
		"|\n    literal %d\n      more",
		">-\n    folded %d\n    two\n\n    para",
		"\"quoted %d\n    on two lines\"",
		"plain %d",
		"|+\n    kept %d\n",
		"[%d]", // not a string: the ConfigMap does not decode
	}
	type entry struct{ key, value string }
	var entries []entry
	for i := range 300 {
		entries = append(entries, entry{fmt.Sprintf("k%03d-%s", i, strings.Repeat("x", 40)), fmt.Sprintf(values[i%4], i)})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cm.yaml")
	r := newTwoReaders(dir)
	next, byKey := 300, 0
	for step := range 150 {
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(entries))
			switch rng.IntN(5) {
			case 0:
				entries[i].value = fmt.Sprintf(values[rng.IntN(len(values))], step)
			case 1:
				entries = append(entries[:i], entries[i+1:]...)
			case 2:
				entries = append(entries[:i], append([]entry{{fmt.Sprintf("n%04d", next), fmt.Sprintf(values[rng.IntN(len(values)-1)], next)}}, entries[i:]...)...)
				next++
			case 3:
				j := rng.IntN(len(entries))
				entries[i], entries[j] = entries[j], entries[i]
			case 4:
				entries[i].value = fmt.Sprintf(values[rng.IntN(len(values)-1)], step) + " # comment"
			}
		}
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: lb}\ndata:\n")
		for _, e := range entries {
			if strings.HasSuffix(e.value, " # comment") && strings.ContainsAny(e.value[:1], "|>") {
				e.value = strings.TrimSuffix(e.value, " # comment") // no comment after a block scalar's lines
			}
			fmt.Fprintf(&b, "  %s: %s\n", e.key, e.value)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		got, want, gotErr, wantErr := r.read()
		sameRead(t, fmt.Sprintf("step %d", step), got, want, gotErr, wantErr)
		byKey += r.cached.work.byKey
	}
	if byKey < 100 {
		t.Errorf("%d of 150 reads were key by key", byKey)
	}
}

// TestKnownDocumentsPositionsMove: a ConfigMap whose document did not change, in a file that
// did, is not parsed again for its positions; they move with the lines before it. A List of
// one ConfigMap, known by its document, keeps its keys' positions too (they were lost).
func TestKnownDocumentsPositionsMove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "all.yaml")
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config, namespace: lb}\ndata:\n  template: |\n    global\n      maxconn 10\n  folded: >\n    one\n    two\n\n    three\n"
	list := "apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: in-list, namespace: lb}\n  data:\n    k: |\n      v\n"
	r := newTwoReaders(dir)
	for i, first := range []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata:\n  x: |\n    1\n    2\n    3\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: lb}\ndata: {}\n"} {
		if err := os.WriteFile(path, []byte(first+"---\n"+cm+"---\n"+list), 0o644); err != nil {
			t.Fatal(err)
		}
		got, want, gotErr, wantErr := r.read()
		sameRead(t, fmt.Sprintf("read %d", i), got, want, gotErr, wantErr)
		if i > 0 && r.cached.work.converted != 1 {
			t.Errorf("read %d: %d documents converted, want the one changed", i, r.cached.work.converted)
		}
	}
}
