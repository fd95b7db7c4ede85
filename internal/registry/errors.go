package registry

import (
	"errors"
	"strconv"

	"github.com/toolsd/toolsd/internal/tool"
)

// Sentinel errors. Every error the registry returns wraps one of them (or
// [tool.ErrUnknownTool] / [tool.ErrToolSetGone]); match them with errors.Is.
var (
	ErrInvalidScope       = errors.New("registry: invalid scope")
	ErrInvalidName        = errors.New("registry: invalid tool name")
	ErrInvalidDefinition  = errors.New("registry: invalid tool definition")
	ErrInvalidSchema      = errors.New("registry: invalid schema")
	ErrInvalidCondition   = errors.New("registry: invalid condition")
	ErrInvalidRestriction = errors.New("registry: invalid restriction")
	ErrUnknownRestriction = errors.New("registry: unknown restriction")
	ErrAlreadyExists      = errors.New("registry: tool already registered")
	ErrNotOwner           = errors.New("registry: tool registered by another owner")
	ErrLimit              = errors.New("registry: limit exceeded")
	ErrPinMismatch        = errors.New("registry: tool changed since it was pinned")
	ErrNotQuarantined     = errors.New("registry: no such quarantined tool")
	ErrActivationFailed   = errors.New("registry: tool activation failed")
	// ErrBusy: a resolution could not finish without holding the registry for longer
	// than it may; retrying may succeed.
	ErrBusy = errors.New("registry: busy")
	// ErrInvalidArguments and ErrInvalidOutput are wrapped by every [*ValidationError].
	ErrInvalidArguments = errors.New("registry: invalid arguments")
	ErrInvalidOutput    = errors.New("registry: invalid output")
)

// unknownToolError is the one error for every name a caller cannot see. Its text is the
// same whether the tool never existed, was filtered by a restriction, is shadowed away
// or is conditional and not admitted, so nothing leaks through the message.
type unknownToolError struct {
	name string
	// scope is named only by management calls (Unregister), never by lookups.
	scope *string
}

func (e *unknownToolError) Error() string {
	if e.scope != nil {
		return "registry: unknown tool " + quoteName(e.name) + " in scope " + quoteName(*e.scope)
	}
	return "registry: unknown tool " + quoteName(e.name)
}

func (e *unknownToolError) Unwrap() error { return tool.ErrUnknownTool }

func errUnknownTool(name string) error { return &unknownToolError{name: name} }

// maxQuoted caps how much caller-supplied text an error message repeats.
const maxQuoted = 64

func quoteName(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}
