package policy

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ErrInvalid matches every error [Parse] reports about the policy's content.
var ErrInvalid = errors.New("policy: invalid policy")

// Error is one problem in the policy section, at a position of the source file.
type Error struct {
	Source       string
	Line, Column int
	// Path names the offending field by its full key, e.g. "policy.rules[2].when".
	Path string
	Msg  string
}

// Error reads like "config.yaml:12:7: policy.rules[2].when: <msg>".
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.Source, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", e.Source, e.Line, e.Column, e.Path, e.Msg)
}

// Is makes every *Error match [ErrInvalid].
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// errs collects positioned errors so one parse reports every problem.
type errs struct {
	source string
	list   []error
}

func (c *errs) add(n *yaml.Node, path, format string, args ...any) {
	c.list = append(c.list, &Error{Source: c.source, Line: n.Line, Column: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *errs) err() error { return errors.Join(c.list...) }
