package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// The bounds of a page of a paged list RPC. A page is kept within maxPageBytes, a
// quarter of gRPC's default receive limit, whatever limits allow to be listed.
const (
	maxPageBytes = 1 << 20
	// maxPageToken bounds a page token read: the tokens given are far shorter.
	maxPageToken = 2048
	// entryOverhead is what a repeated message field adds to an element's own size: its
	// tag and a length of up to three bytes (the page is under 2 MiB).
	entryOverhead = 4
	// pageMACBytes is how much of its HMAC-SHA256 a page token carries.
	pageMACBytes = 16
)

// pageSize is the number of entries a page lists for a request's page_size: most of
// them for 0 (unset) or over most.
func pageSize(requested uint32, most int) int {
	if requested == 0 || uint64(requested) > uint64(most) {
		return most
	}
	return int(requested)
}

// pageTokens signs and reads one RPC's page tokens. A token is a position in the RPC's
// order (the last entry listed), not an offset, so each page reads the live state from
// there. It is read back only by the server that gave it, and only for the RPC it was
// given for: one from another toolsd (a replica behind the same address, or this one
// before a restart), another RPC's or made up is refused rather than read as a
// position among entries it never listed.
type pageTokens struct {
	rpc string // the RPC the tokens are for; signed with the position
	key []byte // the server's
}

// sign returns the token of position pos (strings and integers only).
func (p pageTokens) sign(pos any) string {
	b, _ := json.Marshal(pos) //nolint:errchkjson // strings and integers only
	return base64.RawURLEncoding.EncodeToString(append(p.mac(b), b...))
}

// open reads token s, which sign gave, into pos; "" leaves pos as it is (the first
// page). Any other token is [pageTokens.bad].
func (p pageTokens) open(s string, pos any) error {
	if s == "" {
		return nil
	}
	if len(s) > maxPageToken {
		return p.bad()
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < pageMACBytes || !hmac.Equal(b[:pageMACBytes], p.mac(b[pageMACBytes:])) {
		return p.bad()
	}
	if json.Unmarshal(b[pageMACBytes:], pos) != nil {
		return p.bad()
	}
	return nil
}

// bad is the error of a page token this server did not give for p's RPC.
func (p pageTokens) bad() error {
	return fmt.Errorf("is not a next_page_token that %s gave", p.rpc)
}

// mac is the part of the HMAC-SHA256 of p's RPC and a token's text b under p's key
// that the token carries.
func (p pageTokens) mac(b []byte) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(p.rpc))
	m.Write([]byte{0})
	m.Write(b)
	return m.Sum(nil)[:pageMACBytes]
}
