package main

import (
	"slices"
	"testing"
)

func TestMakeRecipe(t *testing.T) {
	makefile := "GO ?= go\n\n.PHONY: run\nrun: ## Run it\n\t@$(GO) run ./cmd/toolsd \\\n\t\t-config x.yaml -ephemeral\n\n.PHONY: runner\nrunner:\n\techo no\n"
	line, got := makeRecipe(makefile, "run")
	if want := "go run ./cmd/toolsd -config x.yaml -ephemeral"; line != 5 || got != want {
		t.Errorf("makeRecipe(run) = %d, %q; want 5, %q", line, got, want)
	}
	if line, got := makeRecipe(makefile, "build"); line != 0 || got != "" {
		t.Errorf("makeRecipe(build) = %d, %q; want 0, \"\"", line, got)
	}
}

func TestCommandArgs(t *testing.T) {
	prog, flags := commandArgs("go run ./cmd/toolsd -log-format console --ephemeral -config=x.yaml -example-provider")
	want := []string{"-config x.yaml", "-ephemeral", "-example-provider", "-log-format console"}
	if prog != "go run ./cmd/toolsd" || !slices.Equal(flags, want) {
		t.Errorf("commandArgs = %q, %q; want %q, %q", prog, flags, "go run ./cmd/toolsd", want)
	}
}

func TestCheckRunCommand(t *testing.T) {
	makefile := ".PHONY: run\nrun: ## Run it\n\t$(GO) run ./cmd/toolsd -config x.yaml -example-provider -ephemeral -log-format console\n"
	for name, tc := range map[string]struct {
		readme string
		want   map[int]string
	}{
		"same, reordered": {
			readme: "a\n```\ngo run ./cmd/toolsd -ephemeral -log-format=console -example-provider -config x.yaml\n```\n",
		},
		"a flag missing, one added, a value differing": {
			readme: "a\n```\ngo run ./cmd/toolsd -config y.yaml -example-provider -log-format console -listen :1\n```\n",
			want:   map[int]string{3: `it lacks ["-config x.yaml" "-ephemeral"], it adds ["-config y.yaml" "-listen :1"]`},
		},
		"another package": {
			readme: "```\ngo run ./cmd/toolsd/ -config x.yaml -example-provider -ephemeral -log-format console\n```\n",
			want:   map[int]string{2: `runs "go run ./cmd/toolsd/", make run (Makefile:3) "go run ./cmd/toolsd"`},
		},
		"no command": {
			readme: "`go run ./cmd/toolsd -config x.yaml` in prose\n",
			want:   map[int]string{0: "no `go run ./cmd/toolsd …` command"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			wantFindings(t, checkRunCommand(tc.readme, makefile), tc.want)
		})
	}
}

// TestREADMEGoRunIsMakeRun: the README's go run command, for a machine without make,
// runs toolsd as make run does.
func TestREADMEGoRunIsMakeRun(t *testing.T) {
	readme := repoFile(t, "README.md")
	makefile := repoFile(t, "Makefile")
	if fs := checkRunCommand(readme, makefile); len(fs) > 0 {
		t.Errorf("checkRunCommand(README.md, Makefile) = %q, want none", msgs(fs))
	}
}
