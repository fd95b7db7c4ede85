package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolsd/toolsd/internal/config"
)

// TestStartFilesChanged: a reload names the auth files that changed since the start
// (an edited token file does not apply until a restart), and only those.
func TestStartFilesChanged(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokens := write("tokens.txt", "s3cret agent-a\nl3aked agent-b\n")
	jwks := write("jwks.json", `{"keys": []}`)
	var a config.Auth
	a.TokenFile, a.JWKSFile = tokens, jwks
	start := readStartFiles(a)
	if got := start.changed(a); len(got) != 0 {
		t.Fatalf("changed() before any edit = %v, want none", got)
	}
	write("tokens.txt", "s3cret agent-a\n") // the leaked token revoked
	if got := start.changed(a); !slices.Equal(got, []string{tokens}) {
		t.Errorf("changed() after editing the token file = %v, want [%s]", got, tokens)
	}
	if err := os.Remove(jwks); err != nil {
		t.Fatal(err)
	}
	if got := start.changed(a); !slices.Equal(got, []string{tokens, jwks}) {
		t.Errorf("changed() after removing the JWKS too = %v, want [%s %s]", got, tokens, jwks)
	}
	a.JWKSFile = write("other.json", `{"keys": []}`)
	if got := start.changed(a); !slices.Equal(got, []string{tokens}) {
		t.Errorf("changed() with jwks_file pointing elsewhere = %v, want [%s] (the key's change is reported as a key)", got, tokens)
	}
}
