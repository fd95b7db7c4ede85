package main

import (
	"path/filepath"
	"testing"
)

func TestSDKOptions(t *testing.T) {
	opts, err := sdkOptions(filepath.Join("..", "..", "pkg", "provider"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WithBackoff", "WithWindows", "Parallel", "Exclusive", "WithSchema"} {
		if !opts[want] {
			t.Errorf("sdkOptions(pkg/provider) = %v, lacks %s", sortedKeys(opts), want)
		}
	}
	for _, not := range []string{"New", "NewTool"} {
		if opts[not] {
			t.Errorf("sdkOptions(pkg/provider) = %v, has %s, which is no option", sortedKeys(opts), not)
		}
	}
}

func TestCheckSDKOptions(t *testing.T) {
	opts := map[string]bool{"Exclusive": true, "Parallel": true, "WithCondition": true, "WithScope": true, "WithWindows": true}
	text := "x\n\nOptions: `provider.Exclusive()`, `Parallel()`,\n`WithCondition(cel)`; for the provider, `WithScope`. A `WithFoo` after it.\n"
	wantFindings(t, checkSDKOptions(text, opts), map[int]string{
		3: "the Go SDK's options list lacks WithWindows",
	})
	text = "Options: `provider.Exclusive()`, `Parallel()`, `WithCondition(cel)`, `WithScope`,\n`WithWindows`, `WithFoo`.\n"
	wantFindings(t, checkSDKOptions(text, opts), map[int]string{
		1: `names "WithFoo", which is no option`,
	})
	wantFindings(t, checkSDKOptions("no list\n", opts), map[int]string{0: "no list of the Go SDK's options"})
}

// TestREADMEListsSDKOptions: the README's list of the Go SDK's options names every
// option function of pkg/provider.
func TestREADMEListsSDKOptions(t *testing.T) {
	raw := repoFile(t, "README.md")
	opts, err := sdkOptions(filepath.Join("..", "..", "pkg", "provider"))
	if err != nil {
		t.Fatal(err)
	}
	if fs := checkSDKOptions(raw, opts); len(fs) > 0 {
		t.Errorf("checkSDKOptions(README.md) = %q, want none", msgs(fs))
	}
}
