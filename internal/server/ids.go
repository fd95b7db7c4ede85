package server

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns a random 16-hex-digit id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
