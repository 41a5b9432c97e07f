package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestStageOfFindsTheWrappedFailure(t *testing.T) {
	wrapped := fmt.Errorf("sync: %w", &Error{Stage: Staging, Err: errors.New("disk full")})
	for _, c := range []struct {
		err  error
		want string
	}{
		{wrapped, Staging},
		{errors.New("plain"), Write},
		{nil, Write},
	} {
		if got := StageOf(c.err, Write); got != c.want {
			t.Errorf("StageOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if wrapped.Error() != "sync: disk full" {
		t.Errorf("Error() = %q: the failure reads as its cause", wrapped.Error())
	}
}
