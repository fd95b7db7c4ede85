package app

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/registry"
)

// pinFileName is the file in the data directory that keeps the registry's pins across
// restarts, when pinning is on and the session log is durable.
const pinFileName = "pins.json"

// pinFileVersion is the file's format; pinHashVersion names the content hash the pins
// are of (the tag [registry.ContentHash] starts with): a toolsd that hashes otherwise
// must not compare its hashes with these.
const (
	pinFileVersion = 1
	pinHashVersion = "toolsd.tool.v1"
)

// pinSaveTemp is the pattern of the file a save writes beside the pin file before it
// renames it over: a start removes the ones a crash left, and only those, so that an
// operator's files named after the pin file (pins.json.bak, or the pins.json.broken of
// one who moved an unreadable pin file away) are kept.
const pinSaveTemp = pinFileName + ".tmp-*"

// pinSaveEvery is how often new pins are saved: a crash forgets at most this much.
const pinSaveEvery = time.Second

type pinFile struct {
	Version     int         `json:"version"`
	HashVersion string      `json:"hash_version"`
	Pins        []pinRecord `json:"pins"`
}

type pinRecord struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	Hash  string `json:"hash"`
}

// loadPins reads the pins saved at path. No file is no pins; a file that cannot be
// read back whole is an error, not an empty memory: starting without the pins would
// let any changed definition in unnoticed.
func loadPins(path string) ([]registry.Pin, error) {
	removeSaveLeftovers(path)
	return readPins(path)
}

// readPins is [loadPins] without its cleanup: a reload checks the file with it while the
// running toolsd may be saving pins beside it.
func readPins(path string) ([]registry.Pin, error) {
	b, err := readPinFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("app: pins: %w", err)
	}
	var f pinFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("app: pins: %s is not a pin file (%w); move it away to start without the pins", path, err)
	}
	if f.Version != pinFileVersion || f.HashVersion != pinHashVersion {
		return nil, fmt.Errorf("app: pins: %s has version %d of hashes %q; this toolsd reads version %d of %q (move it away to start without the pins)",
			path, f.Version, f.HashVersion, pinFileVersion, pinHashVersion)
	}
	pins := make([]registry.Pin, 0, len(f.Pins))
	for i, p := range f.Pins {
		if err := checkPin(p); err != nil {
			return nil, fmt.Errorf("app: pins: %s: pin %d: %w", path, i, err)
		}
		// The registry writes hashes in lower-case hex; one edited in capitals is the same.
		pins = append(pins, registry.Pin{Scope: p.Scope, Name: p.Name, Hash: strings.ToLower(p.Hash)})
	}
	return pins, nil
}

// maxPinFileBytes bounds the pin file a start reads: twice what toolsd writes for
// [registry.MaxPins] pins of the longest scope and name, room for an operator's
// indentation.
const maxPinFileBytes = int64(2 * (registry.MaxPins*maxPinRecordBytes + 1<<10))

// maxPinRecordBytes is the longest pin in the file toolsd writes: its longest scope,
// name and hash in their JSON member (their characters are never escaped) and a comma.
const maxPinRecordBytes = len(`{"scope":"","name":"","hash":""},`) +
	registry.MaxScopeDepth*(registry.MaxSegmentBytes+1) + registry.MaxNameBytes + 64

// readPinFile reads the pin file at path, which must be a regular file of at most
// maxPinFileBytes: what is not (a file of gigabytes, a named pipe that would hold the
// start until something writes to it, a device) is refused before it is read.
func readPinFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a named pipe opens at once
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%s); move it away to start without the pins", path, st.Mode().Type())
	case st.Size() > maxPinFileBytes:
		return nil, fmt.Errorf("%s has %d bytes, more than a pin file of %d pins takes (%d); move it away to start without the pins",
			path, st.Size(), registry.MaxPins, maxPinFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPinFileBytes+1))
	if err == nil && int64(len(b)) > maxPinFileBytes {
		err = fmt.Errorf("%s grew past %d bytes as it was read; move it away to start without the pins", path, maxPinFileBytes)
	}
	return b, err
}

// removeSaveLeftovers removes the temporary files of saves a crash interrupted.
func removeSaveLeftovers(path string) {
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), pinSaveTemp))
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
}

func checkPin(p pinRecord) error {
	if err := registry.ValidateScope(p.Scope); err != nil {
		return err
	}
	if err := registry.ValidateName(p.Name); err != nil {
		return err
	}
	if b, err := hex.DecodeString(p.Hash); err != nil || len(b) != 32 {
		return fmt.Errorf("hash %q is not a hex SHA-256", p.Hash)
	}
	return nil
}

// savePins replaces the file at path with pins: written beside it, synced, renamed
// over it and the directory synced, so a crash leaves the old file or the new one.
func savePins(path string, pins []registry.Pin) error {
	f := pinFile{Version: pinFileVersion, HashVersion: pinHashVersion, Pins: make([]pinRecord, len(pins))}
	for i, p := range pins {
		f.Pins[i] = pinRecord{Scope: p.Scope, Name: p.Name, Hash: p.Hash}
	}
	b, err := json.Marshal(&f)
	if err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, pinSaveTemp)
	if err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("app: pins: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("app: pins: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	defer d.Close() //nolint:errcheck // read-only
	if err := d.Sync(); err != nil {
		return fmt.Errorf("app: pins: %w", err)
	}
	return nil
}

// pinSaver keeps the pin file up to date with the registry's pins.
type pinSaver struct {
	reg  *registry.Registry
	path string
	log  *zap.Logger

	mu    sync.Mutex
	saved uint64 // the pin generation in the file
	// failing is set after a failed save, so that one failure is logged, not one a second.
	failing bool
}

func newPinSaver(reg *registry.Registry, path string, log *zap.Logger) *pinSaver {
	return &pinSaver{reg: reg, path: path, log: log, saved: reg.PinGeneration()}
}

// save writes the pins if any changed since the last save.
func (s *pinSaver) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg.PinGeneration() == s.saved {
		return nil
	}
	pins, gen := s.reg.Pins()
	if err := savePins(s.path, pins); err != nil {
		if !s.failing {
			s.log.Error("saving the registry's pins failed; retrying every second, and a restart now would forget the newest pins",
				zap.String("path", s.path), zap.Error(err))
		}
		s.failing = true
		return err
	}
	if s.failing {
		s.log.Info("registry pins saved again", zap.String("path", s.path), zap.Int("pins", len(pins)))
	}
	s.failing = false
	s.saved = gen
	return nil
}
