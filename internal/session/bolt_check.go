package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"runtime/debug"
	"syscall"
)

// guard runs fn and turns a panic inside bbolt (a damaged page, or a fault on a mapped
// page past the end of a damaged file) into [ErrCorrupt]. bbolt rolls back a managed
// transaction that panics, so the store stays usable for undamaged sessions.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	return fn()
}

// bbolt's meta page (file format 2), read before bbolt maps the file because bbolt
// trusts the meta page's high-water mark and would fault on pages a truncated file no
// longer has. Offsets are from the start of the page.
const (
	boltMagic       = 0xED0CDAED
	boltFormat      = 2
	metaMagicAt     = 16
	metaVersionAt   = 20
	metaPageSizeAt  = 24
	metaPgidAt      = 56
	metaTxidAt      = 64
	metaChecksumAt  = 72
	metaPageReadLen = 80
)

type boltMeta struct {
	pageSize uint64
	pgid     uint64
	txid     uint64
}

// checkFile reports a damaged or truncated database file as [ErrCorrupt]. A missing
// file is fine (Open creates it); an empty one is not: it is a truncated database, and
// starting over silently would lose every session.
func checkFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a named pipe opens at once
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("session: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session: stat %s: %w", path, err)
	}
	if err := regularFile(path, st); err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return fmt.Errorf("%w: %s is empty (truncated?); move it away to start a new log", ErrCorrupt, path)
	}
	m0, ok0 := readMeta(f, 0)
	first := int64(os.Getpagesize())
	if ok0 {
		first = int64(m0.pageSize)
	}
	m1, ok1 := readMeta(f, first)
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return fmt.Errorf("%w: %s has no valid bbolt meta page", ErrCorrupt, path)
	}
	if need := m.pgid * m.pageSize; uint64(size) < need {
		return fmt.Errorf("%w: %s is truncated: %d bytes, its meta page needs %d", ErrCorrupt, path, size, need)
	}
	return nil
}

// regularFile refuses a log file that is not a regular file (a named pipe, a device, a
// directory): nothing toolsd wrote, and reading or appending to it could block or lose
// every append.
func regularFile(path string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("session: %s is not a regular file (%s); move it away to start a new log", path, st.Mode().Type())
	}
	return nil
}

func readMeta(f *os.File, off int64) (boltMeta, bool) {
	var b [metaPageReadLen]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return boltMeta{}, false
	}
	le := binary.NativeEndian // bbolt writes its structs in memory order
	h := fnv.New64a()
	_, _ = h.Write(b[metaMagicAt:metaChecksumAt])
	if le.Uint32(b[metaMagicAt:]) != boltMagic || le.Uint32(b[metaVersionAt:]) != boltFormat ||
		le.Uint64(b[metaChecksumAt:]) != h.Sum64() {
		return boltMeta{}, false
	}
	m := boltMeta{
		pageSize: uint64(le.Uint32(b[metaPageSizeAt:])),
		pgid:     le.Uint64(b[metaPgidAt:]),
		txid:     le.Uint64(b[metaTxidAt:]),
	}
	return m, m.pageSize >= 512
}
