package main

import (
	"fmt"
	"slices"
	"strings"
)

// makeRecipe returns the recipe of target in a Makefile, its lines joined (continuations
// too), make's $(GO) read as go and a leading @ or - dropped, and the line it starts on.
func makeRecipe(makefile, target string) (int, string) {
	lines := strings.Split(makefile, "\n")
	for i, l := range lines {
		name, _, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(name) != target || strings.HasPrefix(l, "\t") {
			continue
		}
		var cmd []string
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "\t") {
				break
			}
			r = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(r), "\\"))
			if len(cmd) == 0 {
				r = strings.TrimLeft(r, "@-+") // make's prefixes, not the command's
			}
			cmd = append(cmd, r)
		}
		return i + 2, strings.ReplaceAll(strings.Join(cmd, " "), "$(GO)", "go")
	}
	return 0, ""
}

// readmeGoRun returns the README's `go run ./cmd/toolsd …` command (in a fenced block)
// and its line.
func readmeGoRun(text string) (int, string) {
	fenced := false
	for n, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if l = strings.TrimSpace(l); fenced && strings.HasPrefix(l, "go run ./cmd/toolsd") {
			return n + 1, l
		}
	}
	return 0, ""
}

// commandArgs splits a command line into the words before its first flag (the program
// and the package it runs) and its flags, each with its value ("-config=x" and
// "--config x" alike give "-config x"; a flag takes the next word as its value unless
// that word is a flag too), sorted: flag order does not matter.
func commandArgs(cmd string) (string, []string) {
	words := strings.Fields(cmd)
	at := slices.IndexFunc(words, func(w string) bool { return flagName(w) != "" })
	if at < 0 {
		return strings.Join(words, " "), nil
	}
	var flags []string
	for i := at; i < len(words); i++ {
		name := flagName(words[i])
		if name == "" {
			flags = append(flags, words[i]) // a word that is no flag's value: kept as it is
			continue
		}
		f := "-" + name
		if _, v, ok := strings.Cut(words[i], "="); ok {
			f += " " + v
		} else if i+1 < len(words) && flagName(words[i+1]) == "" {
			i++
			f += " " + words[i]
		}
		flags = append(flags, f)
	}
	slices.Sort(flags)
	return strings.Join(words[:at], " "), flags
}

// checkRunCommand holds the README's `go run ./cmd/toolsd …` command, for a machine
// without make, to the Makefile's run recipe it stands for: the same package with the
// same flags and values, in any order.
func checkRunCommand(text, makefile string) []finding {
	line, readme := readmeGoRun(text)
	if readme == "" {
		return []finding{{0, "no `go run ./cmd/toolsd …` command (make run's, without make) found"}}
	}
	mline, recipe := makeRecipe(makefile, "run")
	if recipe == "" {
		return []finding{{line, "the Makefile has no run recipe to compare the go run command with"}}
	}
	rProg, rFlags := commandArgs(readme)
	mProg, mFlags := commandArgs(recipe)
	var out []finding
	if rProg != mProg {
		out = append(out, finding{line, fmt.Sprintf("%q runs %q, make run (Makefile:%d) %q", readme, rProg, mline, mProg)})
	}
	var extra, missing []string
	for _, f := range rFlags {
		if !slices.Contains(mFlags, f) {
			extra = append(extra, f)
		}
	}
	for _, f := range mFlags {
		if !slices.Contains(rFlags, f) {
			missing = append(missing, f)
		}
	}
	var diff []string
	if len(missing) > 0 {
		diff = append(diff, fmt.Sprintf("it lacks %q", missing))
	}
	if len(extra) > 0 {
		diff = append(diff, fmt.Sprintf("it adds %q", extra))
	}
	if len(diff) > 0 {
		out = append(out, finding{line, fmt.Sprintf("the go run command's flags differ from make run's (Makefile:%d): %s", mline, strings.Join(diff, ", "))})
	}
	return out
}
