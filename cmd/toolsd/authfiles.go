package main

import (
	"crypto/sha256"
	"os"

	"github.com/toolsd/toolsd/internal/config"
)

// startFiles holds the digests, by path, of the files the auth section had toolsd read
// at start: the token file, the JWKS and the TLS files. A reload applies the policy
// only, so an edited file (a token revoked by deleting its line) takes effect at the
// next start; reloadOnHUP says so rather than let the operator believe it applied.
type startFiles map[string][sha256.Size]byte

func authFiles(a config.Auth) []string {
	var paths []string
	for _, p := range []string{a.TLS.CertFile, a.TLS.KeyFile, a.TLS.ClientCAFile, a.TokenFile, a.JWKSFile} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// readStartFiles digests the auth files of a; one that cannot be read is left out (the
// start fails on it anyway).
func readStartFiles(a config.Auth) startFiles {
	s := startFiles{}
	for _, p := range authFiles(a) {
		if b, err := os.ReadFile(p); err == nil {
			s[p] = sha256.Sum256(b)
		}
	}
	return s
}

// changed returns the auth files of a, as the reloaded config names them, that toolsd
// read at start and that differ now (or can no longer be read).
func (s startFiles) changed(a config.Auth) []string {
	var paths []string
	for _, p := range authFiles(a) {
		d, ok := s[p]
		if !ok {
			continue // a file the start did not read: its key changed, which is reported
		}
		if b, err := os.ReadFile(p); err != nil || sha256.Sum256(b) != d {
			paths = append(paths, p)
		}
	}
	return paths
}
