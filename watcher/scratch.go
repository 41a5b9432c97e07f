package watcher

// readScratch is what a read of the files uses only while it runs: the jobs, the set of the
// objects seen (duplicates) and the streaming window. A File keeps it between its reads, so
// that a re-read of a List of 100,000 pods after a pod edit does not make them again (24
// bytes a job, 11 a seen object, the window: 3.8 MB a read). Nothing of it leaves a read:
// what is handed out (Objects, a file's entry, origins) is made apart, and what the scratch
// held is cleared before the next read may see it.
type readScratch struct {
	jobs   []job // empty, cleared: a job's results and pending decodes do not outlive its read
	seen   seenSet
	window []byte // cleared, and only while not grown for a big item (streamJSON)
}

// lend gives the scratch to d for one read; it is s's again when taken back (takeBack). A
// read that fails on the way does not give it back: the next one makes it again.
func (s *readScratch) lend(d *manifestDecoder) {
	d.jobs, d.seen, d.window = s.jobs[:0], s.seen, s.window
	*s = readScratch{}
}

// takeBack keeps for the next read what d used, once d has added its n jobs (addJobs, which
// cleared them): jobs cleared past them too, to their capacity (a part past the length may
// still point at pending decodes), unless far more than the read needed; the seen set
// (seenSet.init clears it).
func (s *readScratch) takeBack(d *manifestDecoder, n int) {
	jobs := d.jobs[:cap(d.jobs)]
	clear(jobs[min(n, len(jobs)):]) // the first n: addJobs did
	if cap(jobs) <= 2*n+1024 {
		s.jobs = jobs[:0]
	}
	s.seen, s.window = d.seen, d.window
	d.jobs, d.seen, d.window = nil, seenSet{}, nil
}
