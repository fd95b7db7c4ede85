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

// newKey returns a random 32-byte key.
func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}
