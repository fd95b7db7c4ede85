// Package connid issues the ids of provider and hook connections. An id is seen by the
// peer it names, and a peer may be a tenant: it must tell that tenant nothing of the
// connections other tenants opened, so ids are not numbered in the open. It must never
// be reused for another connection of the process either, since registrations,
// quarantine entries and log lines name a connection by it.
package connid

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
)

// rounds of the Feistel network: four make a keyed permutation that cannot be told
// from a random one (Luby–Rackoff) when the round function is a pseudorandom function.
const rounds = 4

// Source issues ids "<kind>-<instance>-<conn>": instance is 8 random hex digits drawn
// once per Source, so ids of other processes (and restarts) differ; conn is 16 hex
// digits, a secret permutation of a per-Source counter, so the ids of one Source never
// repeat and one id (or any number of them) says nothing about the next or about how
// many were issued in between. It is safe for concurrent use.
type Source struct {
	prefix string
	block  cipher.Block
	n      atomic.Uint64
}

// New returns a Source of ids that start with kind and "-".
func New(kind string) *Source {
	var instance [4]byte
	var key [16]byte
	_, _ = rand.Read(instance[:]) // crypto/rand.Read never fails on supported platforms
	_, _ = rand.Read(key[:])
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("connid: " + err.Error()) // a 16-byte key is always valid
	}
	return &Source{prefix: kind + "-" + hex.EncodeToString(instance[:]) + "-", block: block}
}

// Next returns a new id, one no earlier call of this Source returned.
func (s *Source) Next() string {
	var conn [8]byte
	binary.BigEndian.PutUint64(conn[:], s.permute(s.n.Add(1)))
	return s.prefix + hex.EncodeToString(conn[:])
}

// permute is a balanced Feistel network over 64 bits whose round function is AES under
// the Source's key: a bijection whatever the key, so distinct counters give distinct
// ids, and without the key its outputs look random.
func (s *Source) permute(n uint64) uint64 {
	l, r := uint32(n>>32), uint32(n)
	var in, out [aes.BlockSize]byte
	for round := range rounds {
		in[0] = byte(round)
		binary.BigEndian.PutUint32(in[1:5], r)
		s.block.Encrypt(out[:], in[:])
		l, r = r, l^binary.BigEndian.Uint32(out[:4])
	}
	return uint64(l)<<32 | uint64(r)
}
