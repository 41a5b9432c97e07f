package allocs

import "testing"

var sink []byte

// TestPerRunCountsWhatFAllocates: a run that allocates 1 MiB is counted as about that, not
// as the rounds' total.
func TestPerRunCountsWhatFAllocates(t *testing.T) {
	got := PerRun(4, func() { sink = make([]byte, 1<<20) })
	if got < 1<<20 || got > 1<<20+64<<10 {
		t.Errorf("PerRun of a 1 MiB allocation: %d bytes", got)
	}
	if got := PerRun(4, func() {}); got > 4<<10 {
		t.Errorf("PerRun of nothing: %d bytes", got)
	}
}
