package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
)

// print writes the run's table (Markdown, for docs/performance.md), then the details.
func (b *bench) print(st *startup, results []*result) {
	via := "master socket"
	if b.statsSocket {
		via = "stats socket"
	}
	fmt.Printf("\n| %s x %s, HAProxy %s, `--wait %s`, kube source, runtime API through the %s, %d changes of each kind | p50 | p95 | p99 | max | HAProxy reloads | runtime-API updates | sidecar RSS after |\n",
		b.kind.title, thousands(b.n), haproxyVersion(), b.wait, via, b.changes)
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %s | %s | %s | %s | %s | %d | %s | %d MB |\n", r.what,
			ms(benchrig.Percentile(r.took, .5)), ms(benchrig.Percentile(r.took, .95)), ms(benchrig.Percentile(r.took, .99)), ms(benchrig.Percentile(r.took, 1)),
			r.reloads, counts(r.updates), r.rss)
	}
	fmt.Printf("| start -> every route served (all %s checked, at the end too) | | | | %s | %d | | %d MB |\n", thousands(b.n), ms(st.all), st.reloads, st.rss)
	anon, file := b.proxy.PeakParts()
	fmt.Printf("| sidecar max RSS (VmHWM) over the run (at the peak: RssAnon %d MB, RssFile %d MB) | | | | | | | %d MB |\n\n", anon, file, b.proxy.MaxRSS())

	fmt.Printf("start: first configuration written after %s; a sample of %d hosts served after %s; then all %s checked in %s, %d not served yet at their check",
		ms(st.firstConfig), min(b.sample, b.n), ms(st.sample), thousands(b.n), ms(st.checkAll), st.late)
	if st.statusObjects > 0 {
		fmt.Printf("; the status of %s objects written, the last %s after the start", thousands(st.statusObjects), ms(st.status))
	}
	fmt.Printf("; renders by then %s; max RSS %d MB; at the end all %s served again (checked in %s)\n", counts(st.renders), st.maxRSS, thousands(b.n), ms(st.checkEnd))
	for _, r := range results {
		fmt.Printf("%s: mean %s; renders %s; renders ahead %s; the sidecar's own change -> live (change_to_live_seconds) %s on average",
			r.what, ms(mean(r.took)), counts(r.renders), counts(r.ahead), ms(r.toLive))
		if r.stages != nil {
			var parts []string
			for _, s := range stageNames {
				parts = append(parts, fmt.Sprintf("%s %.1f (max %.1f)", s, median(r.stages[s]), slices.Max(append([]float64{0}, r.stages[s]...))))
			}
			fmt.Printf("; sync stages, medians (and max) of the %d syncs that changed HAProxy: %s ms (and %d syncs that changed nothing)", len(r.stages["build"]), strings.Join(parts, ", "), r.idle)
			fmt.Printf("; the slowest, to find in the sidecar's log (--keep): %s", slowest(r, 3))
		}
		fmt.Println()
	}
}

// slowest are the k slowest changes of r: how long each took and when its write returned (UTC).
func slowest(r *result, k int) string {
	idx := make([]int, len(r.took))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(r.took[b], r.took[a]) })
	var out []string
	for _, i := range idx[:min(k, len(idx))] {
		out = append(out, fmt.Sprintf("%s from %s", ms(r.took[i]), r.at[i].UTC().Format("15:04:05.000")))
	}
	return strings.Join(out, ", ")
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(max(len(d), 1))
}

// ms is d in whole milliseconds, "1,234 ms".
func ms(d time.Duration) string {
	return thousands(int(d.Round(time.Millisecond).Milliseconds())) + " ms"
}

// thousands is n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// counts is the total of samples keyed by one label ({kind="map_updated"}) and each sample,
// "100 (50 backend_added, 50 map_updated)"; "0" for none.
func counts(samples map[string]float64) string {
	total := 0.0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(samples)) {
		label := k
		if i := strings.IndexByte(k, '"'); i >= 0 {
			label = strings.TrimSuffix(k[i+1:], `"}`)
		}
		parts = append(parts, fmt.Sprintf("%.0f %s", samples[k], label))
		total += samples[k]
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f (%s)", total, strings.Join(parts, ", "))
}
