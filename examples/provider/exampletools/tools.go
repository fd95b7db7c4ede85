// Package exampletools holds the example provider's tools. It is importable so that
// toolsd can run the same tools in-process as well as through the example provider
// binary. The argument shapes are fixed: the documentation relies on them. The tools
// are demonstrations: they touch nothing but the notes file they are given.
package exampletools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/toolsd/toolsd/pkg/provider"
)

// EchoArgs are echo's arguments.
type EchoArgs struct {
	Text string `json:"text" description:"The text to return unchanged."`
}

// AddArgs are add's arguments.
type AddArgs struct {
	A float64 `json:"a" description:"The first addend."`
	B float64 `json:"b" description:"The second addend."`
}

// SleepArgs are sleep's arguments.
type SleepArgs struct {
	Ms int64 `json:"ms" jsonschema:"minimum=0" description:"How long to sleep, in milliseconds."`
}

// FailArgs are fail's arguments.
type FailArgs struct {
	Message string `json:"message" description:"The error message the tool fails with."`
}

// WriteNoteArgs are write_note's arguments.
type WriteNoteArgs struct {
	Text string `json:"text" description:"The note to append, one line."`
}

// QueryDBArgs are query_db's arguments.
type QueryDBArgs struct {
	SQL string `json:"sql" description:"The SQL query to run against the example database."`
}

// RowSet is query_db's value.
type RowSet struct {
	Query   string   `json:"query"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// DBSchema is get_db_schema's text.
const DBSchema = `TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE)
TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id), total_cents INTEGER NOT NULL)`

var readOnly = provider.WithAnnotations(provider.Annotations{ReadOnly: true, Idempotent: true})

// Tools returns the example tools: echo, add, sleep, fail, write_note (appending to
// notesPath), get_db_schema and query_db (conditional on a successful get_db_schema).
func Tools(notesPath string) []provider.Tool {
	notes := &noteFile{path: notesPath}
	return []provider.Tool{
		provider.NewTool("echo", "Returns the given text unchanged.", echo, readOnly),
		provider.NewTool("add", "Adds two numbers and returns the sum.", add, readOnly),
		provider.NewTool("sleep", "Waits for the given number of milliseconds, then says how long it slept.", sleep, readOnly),
		provider.NewTool("fail", "Always fails with the given message (for testing error handling).", fail, readOnly),
		provider.NewTool("write_note", "Appends a line to the notes file.", notes.write, provider.Exclusive(),
			provider.WithAnnotations(provider.Annotations{Title: "Write note"})),
		provider.NewTool("get_db_schema", "Describes the tables of the example database.", getDBSchema, readOnly),
		provider.NewTool("query_db", "Runs a read-only SQL query against the example database. Call get_db_schema first.",
			queryDB, readOnly, provider.WithCondition(`session.succeeded("get_db_schema")`)),
	}
}

func echo(_ context.Context, _ provider.Call, a EchoArgs) (string, error) { return a.Text, nil }

func add(_ context.Context, _ provider.Call, a AddArgs) (float64, error) { return a.A + a.B, nil }

func sleep(ctx context.Context, _ provider.Call, a SleepArgs) (string, error) {
	if a.Ms < 0 {
		return "", errors.New("ms must not be negative")
	}
	d := time.Duration(math.MaxInt64) // ms beyond what a Duration holds: until cancelled
	if a.Ms <= math.MaxInt64/int64(time.Millisecond) {
		d = time.Duration(a.Ms) * time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return "slept " + strconv.FormatInt(a.Ms, 10) + " ms", nil
	case <-ctx.Done():
		// The context's own error tells toolsd the tool stopped because it was told to
		// (ABORTED, or TOOL_TIMEOUT), rather than that it failed.
		return "", ctx.Err()
	}
}

func fail(_ context.Context, _ provider.Call, a FailArgs) (string, error) {
	return "", errors.New(a.Message)
}

// noteFile serializes appends within the process; the tool is Exclusive so toolsd
// also never runs two of them in one batch.
type noteFile struct {
	mu   sync.Mutex
	path string
}

func (n *noteFile) write(_ context.Context, _ provider.Call, a WriteNoteArgs) (string, error) {
	if n.path == "" {
		return "", errors.New("no notes file is configured")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("open notes: %w", err)
	}
	_, werr := f.WriteString(a.Text + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("write note: %w", werr)
	}
	return "note written", nil
}

func getDBSchema(context.Context, provider.Call, struct{}) (string, error) { return DBSchema, nil }

func queryDB(_ context.Context, _ provider.Call, a QueryDBArgs) (RowSet, error) {
	return RowSet{
		Query:   a.SQL,
		Columns: []string{"id", "name", "email"},
		Rows: [][]any{
			{1, "Ada Lovelace", "ada@example.com"},
			{2, "Alan Turing", "alan@example.com"},
		},
	}, nil
}
