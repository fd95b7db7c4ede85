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

// durationForm is how a duration is written, for errors.
const durationForm = `a duration like "30s" or "500ms"`

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if err := notScalar(n, durationForm); err != nil {
		return err
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		hint := ""
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			hint = " (no unit)"
		}
		return &valueError{line: n.Line, column: n.Column, err: fmt.Errorf("want %s, got %s%s", durationForm, written(n), hint)}
	}
	*d = Duration(v)
	return nil
}

// notScalar refuses a list or a mapping written where a scalar (want) belongs.
func notScalar(n *yaml.Node, want string) error {
	if n.Kind != yaml.SequenceNode && n.Kind != yaml.MappingNode {
		return nil
	}
	return &valueError{line: n.Line, column: n.Column, err: fmt.Errorf("want %s, got %s", want, written(n))}
}

// written says what n holds as the file wrote it, for errors: a list, a mapping, a
// quoted string or a number, a bool or a null as written.
func written(n *yaml.Node) string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.ShortTag() == "!!str":
		return strconv.Quote(n.Value)
	}
	return n.Value
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

// sizeForm is how a size is written, for errors.
const sizeForm = `a byte count like 1048576 or "1MiB"`

// UnmarshalYAML parses a size with an optional binary unit.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if err := notScalar(n, sizeForm); err != nil {
		return err
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		hint := ""
		if errors.Is(err, errSizeTooLarge) {
			hint = " (too large)"
		}
		return &valueError{line: n.Line, column: n.Column, err: fmt.Errorf("want %s, got %s%s", sizeForm, written(n), hint)}
	}
	*s = Size(v)
	return nil
}

// errSizeTooLarge is ParseSize's refusal of a size past an int64.
var errSizeTooLarge = errors.New("is too large")

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
		return 0, fmt.Errorf("size %s %w", strconv.Quote(text), errSizeTooLarge)
	}
	return v * mult, nil
}
