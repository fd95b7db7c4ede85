package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/config"
)

// boundNote is a bound the Limits table notes beside a default: "64 (at most 10000)",
// "10s (at least 1s)". A bound named by another key ("at most `max_providers`") is not
// one: it reads no number.
var boundNote = regexp.MustCompile(`\(at (most|least) ([0-9][0-9A-Za-z.]*)\)`)

// step is one kind of a limit's values, read from its default: a count, a size or a
// duration, with the smallest step past a value of it.
type step struct {
	parse  func(string) (int64, error)
	format func(int64) string
}

var (
	countStep    = step{func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, func(n int64) string { return strconv.FormatInt(n, 10) }}
	sizeStep     = step{config.ParseSize, func(n int64) string { return strconv.FormatInt(n, 10) }}
	durationStep = step{
		func(s string) (int64, error) { d, err := time.ParseDuration(s); return int64(d), err },
		func(n int64) string { return time.Duration(n).String() },
	}
)

// stepOf is the kind of the values of a limit whose default is def.
func stepOf(def string) (step, bool) {
	for _, s := range []step{countStep, sizeStep, durationStep} {
		if _, err := s.parse(def); err == nil {
			return s, true
		}
	}
	return step{}, false
}

// loadLimit loads a config that sets key (section.name) to value over the defaults.
func loadLimit(key, value string) error {
	section, name, _ := strings.Cut(key, ".")
	_, err := config.Parse([]byte(section+":\n  "+name+": "+value+"\n"), "probe")
	return err
}

// checkLimitsBounds holds the bounds the Limits table notes to those config enforces,
// found by loading configs rather than restated here: a config setting the key to its
// bound loads, and one setting it a step past (a byte, a nanosecond, one) is refused.
func checkLimitsBounds(rows []limitsRow, defaults map[string]*yaml.Node) []finding {
	var out []finding
	for _, r := range rows {
		cells := strings.Split(r.defaults, "/")
		if len(cells) != len(r.keys) {
			continue // checkLimitsTable reports it
		}
		for i, k := range r.keys {
			m := boundNote.FindStringSubmatch(cells[i])
			if m == nil || defaults[k] == nil {
				continue
			}
			s, ok := stepOf(defaults[k].Value)
			if !ok {
				continue
			}
			bound, err := s.parse(m[2])
			if err != nil {
				out = append(out, finding{r.line, fmt.Sprintf("%s: the bound %q is no value of it (its default is %s)", k, m[2], defaults[k].Value)})
				continue
			}
			past := bound + 1
			if m[1] == "least" {
				past = bound - 1
			}
			if err := loadLimit(k, s.format(bound)); err != nil {
				out = append(out, finding{r.line, fmt.Sprintf("%s: the README says at %s %s, but config refuses %s: %v", k, m[1], m[2], m[2], err)})
			}
			if loadLimit(k, s.format(past)) == nil {
				out = append(out, finding{r.line, fmt.Sprintf("%s: the README says at %s %s, but config takes %s", k, m[1], m[2], s.format(past))})
			}
		}
	}
	return out
}
