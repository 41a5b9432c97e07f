package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// report is the part of the suite's report.yaml (sigs.k8s.io/gateway-api/conformance/apis/v1,
// ConformanceReport) the summary reads.
type report struct {
	GatewayAPIVersion string          `json:"gatewayAPIVersion"`
	GatewayAPIChannel string          `json:"gatewayAPIChannel"`
	Profiles          []profileReport `json:"profiles"`
}

type profileReport struct {
	Name     string          `json:"name"`
	Core     testStatus      `json:"core"`
	Extended *extendedStatus `json:"extended"`
}

type testStatus struct {
	Result     string `json:"result"`
	Statistics struct {
		Passed, Skipped, Failed int
	} `json:"statistics"`
	SkippedTests []string `json:"skippedTests"`
	FailedTests  []string `json:"failedTests"`
}

type extendedStatus struct {
	testStatus
	SupportedFeatures   []string `json:"supportedFeatures"`
	UnsupportedFeatures []string `json:"unsupportedFeatures"`
}

func parseReport(data []byte) (*report, error) {
	var r report
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read the suite's report: %w", err)
	}
	if len(r.Profiles) == 0 {
		return nil, fmt.Errorf("the suite's report has no profile")
	}
	return &r, nil
}

// ran is how many of the tests of s ran (the skipped ones are not counted: a single test's run
// skips all the others).
func (s testStatus) ran() int { return s.Statistics.Passed + s.Statistics.Failed }

// summary is one line per profile: "GATEWAY-HTTP core: 10/36 passed; extended: none claimed;
// failed: A, B".
func (r *report) summary() string {
	var lines []string
	for _, p := range r.Profiles {
		line := fmt.Sprintf("%s core: %d/%d passed", p.Name, p.Core.Statistics.Passed, p.Core.ran())
		if n := p.Core.Statistics.Skipped; n > 0 {
			line += fmt.Sprintf(" (%d skipped)", n)
		}
		failed := slices.Clone(p.Core.FailedTests)
		if e := p.Extended; e == nil || len(e.SupportedFeatures) == 0 {
			line += "; extended: none claimed"
		} else {
			line += fmt.Sprintf("; extended: %d/%d passed (%s)", e.Statistics.Passed, e.ran(), strings.Join(e.SupportedFeatures, ", "))
			failed = append(failed, e.FailedTests...)
		}
		if len(failed) > 0 {
			line += "; failed: " + strings.Join(failed, ", ")
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// testLine is a result line of go test -v for one test of the suite.
var testLine = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): TestConformance/(\w+) \(([\d.]+s)\)`)

// results are the suite's tests by result (PASS, FAIL, SKIP), as its verbose log gives them.
func results(log []byte) map[string][]string {
	out := map[string][]string{}
	for _, m := range testLine.FindAllSubmatch(log, -1) {
		out[string(m[1])] = append(out[string(m[1])], string(m[2]))
	}
	return out
}
