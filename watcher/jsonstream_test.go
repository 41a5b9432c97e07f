package watcher

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// bigPodList is a List of n pods as kubectl writes it (kind after the items), one item a
// line; bad, when set, changes item k.
func bigPodList(n, k int, bad func(string) string) (head string, items []string, tail string) {
	for i := range n {
		p := podJSON(fmt.Sprintf("pod-%05d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), true)
		if i == k && bad != nil {
			p = bad(p)
		}
		items = append(items, p)
	}
	return "{\n\"apiVersion\": \"v1\",\n\"items\": [\n", items, "\n],\n\"kind\": \"List\",\n\"metadata\": {\"resourceVersion\": \"\"}\n}\n"
}

// itemReader gives a List one item per Read (the head with the first), and notes how many
// jobs the decoder had when each item was asked for.
type itemReader struct {
	chunks []string
	next   int
	d      *manifestDecoder
	jobsAt []int // len(d.jobs) when chunk i was first read
}

func (r *itemReader) Read(p []byte) (int, error) {
	for r.next < len(r.chunks) && r.chunks[r.next] == "" {
		r.next++
	}
	if r.next == len(r.chunks) {
		return 0, io.EOF
	}
	if len(r.jobsAt) == r.next {
		r.jobsAt = append(r.jobsAt, len(r.d.jobs))
	}
	n := copy(p, r.chunks[r.next])
	r.chunks[r.next] = r.chunks[r.next][n:]
	return n, nil
}

// TestStreamAddsJobsAsItReads: a List is read item by item: when the next item is read, a job
// for each item before it is there already, decoded early and without its bytes (nothing else
// per item waits for the end of the List, which may hold a hundred thousand), and the jobs are
// those of the in-memory path, in the same order.
func TestStreamAddsJobsAsItReads(t *testing.T) {
	const n = 400
	head, items, tail := bigPodList(n, -1, nil)
	chunks := []string{head + items[0]}
	for _, it := range items[1:] {
		chunks = append(chunks, ",\n"+it)
	}
	chunks = append(chunks, tail)
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache %v", cached), func(t *testing.T) {
			d := newManifestDecoder("lb", testLogger(t))
			if cached {
				d.cache = &docCache{}
			}
			d.json.streamBuf = 256 // smaller than an item: the window grows to one
			r := &itemReader{chunks: slices.Clone(chunks), d: d}
			if _, _, err := d.streamJSON("pods.json", r); err != nil {
				t.Fatalf("the streaming path gave up: %v", err)
			}
			if len(r.jobsAt) != len(chunks) {
				t.Fatalf("%d chunks read, want %d", len(r.jobsAt), len(chunks))
			}
			for i := 1; i < n; i++ {
				if r.jobsAt[i] < i-1 {
					t.Fatalf("item %d read with %d jobs, want at least %d: the items wait for the end of the List", i, r.jobsAt[i], i-1)
				}
			}
			if len(d.jobs) != n {
				t.Fatalf("%d jobs, want %d", len(d.jobs), n)
			}
			for i, j := range d.jobs {
				if j.res == nil || j.p == nil || j.p.data != nil || j.p.keyed != cached {
					t.Fatalf("item %d: not decoded early with its bytes dropped (res %v, keyed %v)", i, j.res != nil, j.p != nil && j.p.keyed)
				}
			}
			d.finish()
			want := newManifestDecoder("lb", testLogger(t))
			want.file("pods.json", []byte(strings.Join(chunks, "")))
			want.finish()
			if got, exp := fmt.Sprint(d.objs), fmt.Sprint(want.objs); got != exp {
				t.Errorf("objects differ from the in-memory path")
			}
		})
	}
}

// TestStreamBailAddsNothing: when an item late in a List makes the streaming path give up,
// the jobs it added for the items before are taken back (those of the files read before it
// stay), and the file read whole reports what is wrong.
func TestStreamBailAddsNothing(t *testing.T) {
	nested := `{"apiVersion":"v1","kind":"List","items":[]}`
	for name, last := range map[string]string{
		"a nested List":    nested,
		"not an object":    `7`,
		"a syntax error":   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},}`,
		"a bad apiVersion": `{"apiVersion":"a/b/c","kind":"Pod","metadata":{"name":"x"}}`,
		// Known to be wrong only at the end: its kind would have come from a typed List's.
		"no kind, in a List": `{"apiVersion":"v1","metadata":{"name":"x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			head, items, tail := bigPodList(50, -1, nil)
			data := head + strings.Join(append(items, last), ",\n") + tail
			d := newManifestDecoder("lb", testLogger(t))
			d.cache = &docCache{}
			d.json.streamBuf = 64
			d.fail("before.json", 3, 0, errors.New("a job of the file read before"))
			_, _, err := d.streamJSON("pods.json", strings.NewReader(data))
			if !errors.Is(err, errBail) {
				t.Fatalf("err %v, want errBail", err)
			}
			if len(d.jobs) != 1 || d.jobs[0].at.rel != "before.json" {
				t.Fatalf("%d jobs after giving up, want only the one before", len(d.jobs))
			}
		})
	}
}

// TestStreamErrorInItem: an error in one item of a big List (item k of 3,000) is reported as
// the in-memory path reports it: the file, the List's line, the field; cold and from the
// cache, streamed through windows of any size. The file is bad input: none of its pods are
// taken (it never had a good version).
func TestStreamErrorInItem(t *testing.T) {
	const n, k = 3000, 1717
	head, items, tail := bigPodList(n, k, func(p string) string {
		return strings.Replace(p, `"image":"nginx"}]`, `"image":"nginx","bogus":1}]`, 1)
	})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/pods.json": head + strings.Join(items, ",\n") + tail})
	whole := defaultJSON()
	whole.streamMin = 1 << 40
	wantObjs, wantErr := (&File{Dir: dir, DefaultNamespace: "lb", json: &whole}).Objects(t.Context())
	want := []string{fmt.Sprint(wantErr)}
	if len(want) != 1 || !strings.Contains(want[0], "sub/pods.json line 1") || !strings.Contains(want[0], `unknown field "spec.containers[0].bogus"`) {
		t.Fatalf("the in-memory path reports %q", want)
	}
	for _, buf := range []int{7, 4096, 1 << 20} {
		opts := defaultJSON()
		opts.streamMin, opts.streamBuf = 0, buf
		f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, json: &opts}
		for _, read := range []string{"cold", "from the cache"} {
			objs, err := f.Objects(t.Context())
			if got := fmt.Sprint(err); err == nil || got != want[0] {
				t.Errorf("window %d, %s: error %q, want %q", buf, read, got, want[0])
			}
			if objs == nil || len(objs.ConvertedPods) != len(wantObjs.Pods) || len(objs.ConvertedPods) != 0 {
				t.Errorf("window %d, %s: want no pods, as the in-memory path", buf, read)
			}
		}
	}
}

// TestPlaceFreshInPlace: the jobs of the files parsed now are placed in the read's own list
// when each file's part fits where its jobs were (no copy of a 100,000-job list), and in a new
// one when a bad file's last good version has more objects than its place; both give what a
// copy gives, and the place left over holds nothing (no pending decode is kept alive).
func TestPlaceFreshInPlace(t *testing.T) {
	pod := &decoded{v: &corev1.Pod{}}
	other := &decoded{} // a kind nothing reads
	at := func(rel string) *origin { return &origin{rel: rel} }
	a, b, c, d := at("a"), at("b"), at("c"), at("d")
	bad := errors.New("bad")
	// scenario gives the jobs of four files (a and c as the last read had them, b and d parsed
	// now: b with an object of a kind nothing reads and one to skip, d bad) and the fresh files;
	// goodOfD is how many objects d's last good version had.
	scenario := func(goodOfD int) ([]job, []freshFile) {
		jobs := []job{
			{at: a, res: pod}, {at: a, res: pod},
			{at: b, res: pod, p: &pending{}}, {at: b, res: other, p: &pending{}}, {at: b, res: pod, p: &pending{}}, {at: b, p: &pending{skip: true}}, {at: b, res: pod, p: &pending{}},
			{at: c, res: pod},
			{at: d, res: pod, p: &pending{}}, {at: d, p: &pending{err: bad}},
		}
		de := &fileEntry{}
		de.good, _, _ = keep(slices.Repeat([]job{{at: d, res: pod}}, goodOfD), -1, nil)
		return jobs, []freshFile{{start: 2, end: 7, entry: &fileEntry{}}, {start: 8, end: 10, entry: de}}
	}
	same := func(x, y job) bool {
		return x.at == y.at && x.res == y.res && x.skipped() == y.skipped() && (x.p == nil) == (y.p == nil) && (x.p == nil || x.p.err == y.p.err)
	}
	for _, c := range []struct {
		goodOfD int
		inPlace bool
	}{{0, true}, {1, true}, {4, false}} {
		t.Run(fmt.Sprintf("d had %d objects", c.goodOfD), func(t *testing.T) {
			jobs, fresh := scenario(c.goodOfD)
			got := placeFresh(jobs, fresh)
			want := placeFreshByCopy(scenario(c.goodOfD))
			if !slices.EqualFunc(got, want, same) {
				t.Fatalf("placed %d jobs, a copy gives %d, or they differ", len(got), len(want))
			}
			if inPlace := len(got) > 0 && &got[0] == &jobs[0]; inPlace != c.inPlace {
				t.Errorf("placed in the read's own list: %v, want %v", inPlace, c.inPlace)
			}
			if c.inPlace {
				for i, j := range jobs[len(got):] {
					if j != (job{}) {
						t.Errorf("the place left over, job %d, still holds %+v", len(got)+i, j)
					}
				}
			}
		})
	}
}

// placeFreshByCopy is what placeFresh gave before it placed jobs in place.
func placeFreshByCopy(jobs []job, fresh []freshFile) []job {
	out := make([]job, 0, len(jobs))
	at := 0
	for _, p := range fresh {
		out = append(out, jobs[at:p.start]...)
		p.entry.ignored = ignoredKeys(p.still, jobs[p.start:p.end])
		p.entry.jobs, p.entry.bad, p.entry.lastKept = keep(jobs[p.start:p.end], -1, nil)
		if !p.entry.bad {
			p.entry.good = p.entry.jobs
		}
		out = p.entry.appendContribution(out)
		at = p.end
	}
	return append(out, jobs[at:]...)
}

// TestKeptJobs: a file's entry keeps its objects' results and their origins by runs (the items
// of a List share one origin: a pointer a pod, not a job), and gives back the jobs kept in
// their order, errors where they were; the objects nothing reads and those skipped are not
// kept.
func TestKeptJobs(t *testing.T) {
	pod, other := &decoded{v: &corev1.Pod{}}, &decoded{}
	list, doc, bad := &origin{rel: "a", line: 1}, &origin{rel: "a", line: 90}, errors.New("bad")
	jobs := []job{
		{at: list, res: pod}, {at: list, res: pod, p: &pending{}}, {at: list, res: other, p: &pending{}},
		{at: list, res: pod}, {at: list, p: &pending{err: bad}}, {at: list, res: pod},
		{at: doc, p: &pending{skip: true}}, {at: doc, res: pod, p: &pending{}}, {at: doc, p: &pending{err: bad}},
	}
	kept, isBad, before := keep(jobs, 5, nil)
	if !isBad || before != 4 {
		t.Fatalf("bad %v, %d kept before job 5; want true, 4", isBad, before)
	}
	if kept.n != 5 || len(kept.at) != 2 {
		t.Errorf("%d results in %d runs of origins, want 5 in 2", kept.n, len(kept.at))
	}
	var want []job
	for _, j := range jobs {
		if keeps(j) || (j.p != nil && j.p.err != nil) {
			want = append(want, j)
		}
	}
	same := func(x, y job) bool {
		return x.at == y.at && x.res == y.res && (x.p != nil && x.p.err != nil) == (y.p != nil && y.p.err != nil)
	}
	if got := kept.appendTo(nil, kept.len()); !slices.EqualFunc(got, want, same) {
		t.Errorf("gave back %d jobs, want %d, or not those kept in their order", len(got), len(want))
	}
	if got := kept.appendTo(nil, before); !slices.EqualFunc(got, want[:before], same) {
		t.Errorf("gave back %d jobs before job 5, want %d, or not the first kept", len(got), before)
	}
}
