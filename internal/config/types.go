package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var errEOF = io.EOF

// Duration is a time.Duration written as "2s", "150ms" or "10m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if err := notScalar(n, "a duration like 2s or 500ms"); err != nil {
		return err
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &valueError{line: n.Line, column: n.Column, err: err}
	}
	*d = Duration(v)
	return nil
}

// notScalar refuses a list or a mapping written where a scalar (want) belongs. Its
// Value is empty, so parsing it would quote an empty text the file does not hold.
func notScalar(n *yaml.Node, want string) error {
	kind := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping"}[n.Kind]
	if kind == "" {
		return nil
	}
	return &valueError{line: n.Line, column: n.Column, err: fmt.Errorf("%s, not %s", kind, want)}
}

// valueError is a Duration's or Size's refusal of its text, with the value's place; decode
// adds the key's path.
type valueError struct {
	line, column int
	err          error
}

func (e *valueError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }

func (e *valueError) Unwrap() error { return e.err }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Size is a byte count written as 1048576, "64KiB", "1MiB" or "1GiB".
type Size int64

// UnmarshalYAML parses a size with an optional binary unit.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if err := notScalar(n, "a byte count like 1048576 or 1MiB"); err != nil {
		return err
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return &valueError{line: n.Line, column: n.Column, err: err}
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "123", "64KiB", "4MiB", "1GiB".
func ParseSize(text string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	t := strings.TrimSpace(text)
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, t = u.mult, strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, errors.New("size " + strconv.Quote(text) + " is not a byte count like 1048576 or 1MiB")
	}
	if v > math.MaxInt64/mult {
		return 0, errors.New("size " + strconv.Quote(text) + " is too large")
	}
	return v * mult, nil
}
