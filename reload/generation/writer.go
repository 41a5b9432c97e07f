package generation

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Writer writes, in the background, the renderings HAProxy already runs (the runtime API made
// them live): each is staged, checked and activated with no reload, so that the files say
// what HAProxy runs and a later reload or restart loads the same. A stream of changes is not
// held up by the check: only the latest queued rendering is written. Whatever else stages,
// activates or prunes generations holds Exclusive, so that it never interleaves with a
// write.
type Writer struct {
	store *Store
	check func(ctx context.Context, g *Generation) error
	// isRejected tells a check's rejection (bad input) from a failure to check.
	isRejected func(error) bool
	done       func(Written)
	// stopTimeout bounds each write once the writer's context is done.
	stopTimeout time.Duration

	excl sync.Mutex // held by a write, or through Exclusive

	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	busy    bool
	pending *WriteJob
	wake    chan struct{}
}

// WriteJob is one rendering to write.
type WriteJob struct {
	Hash    string
	Content Content // the configuration, certificates, map files and other files
	// Payload is the caller's, handed back in Written.
	Payload any
	queued  time.Time
}

// Written is the outcome of one write.
type Written struct {
	Job *WriteJob
	Gen *Generation // the generation made live; nil when the write did not happen
	// Rejected is why the check refused the rendering (bad input): the caller records it
	// (live.CheckRefused) and takes the runtime changes back. Err is an operational failure
	// (disk), worth another try.
	Rejected, Err error
	// Superseded is set when a newer rendering was queued before this one could be made
	// live: it was checked but not made live.
	Superseded   bool
	Waited, Took time.Duration
}

// NewWriter returns a writer into store. check validates a staged generation (nil: none);
// isRejected tells its rejections (bad input) from its failures (nil: all are failures). done
// is called after each write, in the writer's goroutine (or the caller's, for WriteNow).
// stopTimeout bounds each write once Run's context is done.
func NewWriter(store *Store, check func(context.Context, *Generation) error, isRejected func(error) bool, done func(Written), stopTimeout time.Duration) *Writer {
	w := &Writer{store: store, check: check, isRejected: isRejected, done: done, stopTimeout: stopTimeout,
		wake: make(chan struct{}, 1)}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Run writes queued renderings until ctx ends; the one under way, and the last one queued,
// are still written then (HAProxy runs them already: the files must say so for its next
// start), each within stopTimeout.
func (w *Writer) Run(ctx context.Context) {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	write := func(job *WriteJob) {
		jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(ctx, func() { time.AfterFunc(w.stopTimeout, cancel) })
		defer stop()
		// done runs before the writer counts as idle: whoever waits for it (Drop) sees its
		// outcome recorded.
		w.done(w.write(jctx, job))
		w.mu.Lock()
		w.busy = false
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	defer func() {
		w.mu.Lock()
		job := w.pending // queued while the writer was deciding to stop
		w.running, w.pending = false, nil
		w.busy = job != nil
		w.mu.Unlock()
		if job != nil {
			write(job)
		}
	}()
	for {
		select {
		case <-ctx.Done():
		case <-w.wake:
		}
		stopping := ctx.Err() != nil
		w.mu.Lock()
		job := w.pending
		w.pending = nil
		w.busy = job != nil
		w.mu.Unlock()
		if job != nil {
			write(job)
		}
		if stopping {
			return
		}
	}
}

// Queue hands a rendering to the running writer, replacing any not yet started; false when no
// writer runs (the caller then uses WriteNow).
func (w *Writer) Queue(job *WriteJob) bool {
	job.queued = time.Now()
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return false
	}
	w.pending = job
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// WriteNow writes job in the caller's goroutine, hands the outcome to done as a background
// write's, and returns it: every write's outcome is recorded in one place.
func (w *Writer) WriteNow(ctx context.Context, job *WriteJob) Written {
	job.queued = time.Now()
	res := w.write(ctx, job)
	w.done(res)
	return res
}

// Drop forgets the rendering waiting to be written (the caller makes a newer one live) and
// waits for the one being written.
func (w *Writer) Drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = nil
	for w.busy {
		w.cond.Wait()
	}
}

// Pending reports whether a rendering with this hash is queued or being written.
func (w *Writer) Pending(hash string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return (w.pending != nil && w.pending.Hash == hash) || w.busy
}

func (w *Writer) superseded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending != nil
}

// Exclusive is the lock that keeps writes from running while it is held (a queued one
// waits): whatever else stages generations holds it.
func (w *Writer) Exclusive() sync.Locker { return &w.excl }

// Activate makes g live (see Store.Activate) while no write is under way.
func (w *Writer) Activate(g *Generation) error {
	w.excl.Lock()
	defer w.excl.Unlock()
	return w.store.Activate(g)
}

// Rollback makes good live again, if any generation is live (see Store.Rollback), and prunes
// what nothing needs any more, while no write is under way.
func (w *Writer) Rollback(good *Generation) error {
	w.excl.Lock()
	defer w.excl.Unlock()
	var err error
	if w.store.Live() != nil {
		err = w.store.Rollback(good)
	}
	_ = w.store.Prune(good)
	return err
}

// Prune deletes the generations nothing needs any more (see Store.Prune) while no write is
// under way.
func (w *Writer) Prune(keep ...*Generation) error {
	w.excl.Lock()
	defer w.excl.Unlock()
	return w.store.Prune(keep...)
}

// write stages, checks and activates job's rendering.
func (w *Writer) write(ctx context.Context, job *WriteJob) (res Written) {
	w.excl.Lock()
	defer w.excl.Unlock()
	start := time.Now()
	res = Written{Job: job, Waited: start.Sub(job.queued)}
	defer func() { res.Took = time.Since(start) }()
	gen, err := w.store.StageContent(job.Content, job.Hash)
	if err != nil {
		res.Err = err
		return res
	}
	if w.check != nil {
		if err := w.check(ctx, gen); err != nil {
			_ = w.store.Discard(gen)
			if w.isRejected != nil && w.isRejected(err) {
				res.Rejected = err
			} else {
				res.Err = err
			}
			return res
		}
	}
	if w.superseded() {
		// A newer rendering is queued: HAProxy runs that one already, so making this one
		// live on disk would only put the files behind for a moment. Left for Prune.
		res.Superseded = true
		return res
	}
	if err := w.store.Activate(gen); err != nil {
		res.Err = fmt.Errorf("activate generation (HAProxy already runs it through the runtime API): %w", err)
		return res
	}
	res.Gen = gen
	return res
}
