package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// minTokenLen rejects guessable static tokens; `openssl rand -hex 32` gives 64.
const minTokenLen = 16

// tokenSet holds the SHA-256 hashes of the static bearer tokens, never the tokens.
//
// The token file comes in two formats. Lines, one token per line, "#" comments:
//
//	<token> <identity>
//	sha256:<64 hex digits> <identity>
//
// or YAML, recognized by a first significant line "tokens:":
//
//	tokens:
//	  - identity: agent-a
//	    token: "..."          # or sha256: "<64 hex digits>"
//
// The sha256: form keeps plaintext tokens out of the file as well as out of memory.
type tokenSet struct {
	entries   []tokenEntry
	plaintext bool // some token was written in clear
}

type tokenEntry struct {
	hash     [sha256.Size]byte
	identity string
}

func loadTokenFile(file string) (*tokenSet, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, configError("token file: %v", err)
	}
	ts, err := parseTokens(data)
	var le *lineError
	if errors.As(err, &le) && le.line > 0 {
		return nil, configError("token file %s:%d: %v", file, le.line, le.err)
	}
	if err != nil {
		return nil, configError("token file %s: %v", file, err)
	}
	return ts, nil
}

// lineError is a token file's error at a line (1-based), reported as "file:line: ...".
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string {
	if e.line == 0 { // unknown
		return e.err.Error()
	}
	return fmt.Sprintf("line %d: %v", e.line, e.err)
}

func (e *lineError) Unwrap() error { return e.err }

func parseTokens(data []byte) (*tokenSet, error) {
	// A byte order mark (some editors write one) would otherwise become part of the
	// first token, which then never matches, or hide a YAML file's "tokens:".
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	ts := &tokenSet{}
	seen := map[[sha256.Size]byte]int{} // the line of each token
	add := func(line int, entry, token, hash, identity string) error {
		bad := func(format string, args ...any) error {
			if entry != "" {
				format = entry + ": " + format
			}
			return &lineError{line: line, err: fmt.Errorf(format, args...)}
		}
		if err := checkIdentityName(identity); err != nil {
			return bad("%w", err)
		}
		var e tokenEntry
		switch {
		case token != "" && hash != "":
			return bad("give either a token or its sha256, not both")
		case hash != "":
			b, err := hex.DecodeString(hash)
			if err != nil || len(b) != sha256.Size {
				return bad("sha256 must be %d hex digits", 2*sha256.Size)
			}
			copy(e.hash[:], b)
		case looksHashed(token):
			// Taken as a token, the hash itself would be the credential.
			return bad("token looks like a sha256 entry (%.7s…): write the hash as sha256:<hex> in a line, or as sha256: in YAML", token)
		case len(token) < minTokenLen:
			return bad("token is shorter than %d characters", minTokenLen)
		case strings.IndexFunc(token, unicode.IsSpace) >= 0:
			return bad("token contains white space")
		case strings.IndexFunc(token, notSendable) >= 0:
			// gRPC refuses to send such a header value: the token could never match.
			return bad("token contains characters other than printable ASCII, which no client can send in a header")
		default:
			e.hash = sha256.Sum256([]byte(token))
			ts.plaintext = true
		}
		if first, dup := seen[e.hash]; dup {
			return bad("token listed twice (first at line %d)", first)
		}
		seen[e.hash] = line
		e.identity = identity
		ts.entries = append(ts.entries, e)
		return nil
	}
	var err error
	if isYAMLTokens(data) {
		err = parseYAMLTokens(data, add)
	} else {
		err = parseLineTokens(data, add)
	}
	if err != nil {
		return nil, err
	}
	if len(ts.entries) == 0 {
		return nil, fmt.Errorf("no tokens")
	}
	return ts, nil
}

// addToken adds the entry at line of the file; entry names it in errors ("tokens[3]"),
// or is empty when the line is the entry.
type addToken func(line int, entry, token, hash, identity string) error

func isYAMLTokens(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || line == "---" {
			continue
		}
		return strings.HasPrefix(line, "tokens:")
	}
	return false
}

// yamlToken is one entry of a YAML token file.
type yamlToken struct {
	Identity string `yaml:"identity"`
	Token    string `yaml:"token"`
	SHA256   string `yaml:"sha256"`
}

// entryType is how the YAML decoder names [yamlToken] in its errors.
const entryType = "auth.yamlToken"

func parseYAMLTokens(data []byte, add addToken) error {
	var doc struct {
		Tokens []yamlToken `yaml:"tokens"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return yamlError(err)
	}
	if err := oneYAMLDocument(dec); err != nil {
		return err
	}
	lines := yamlTokenLines(data)
	for i, t := range doc.Tokens {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		if err := add(line, fmt.Sprintf("tokens[%d]", i), t.Token, t.SHA256, t.Identity); err != nil {
			return err
		}
	}
	return nil
}

// yamlTokenLines returns the line of each entry of a YAML token file's tokens list,
// which the decoder's values do not carry (an alias's entries are at its anchor).
func yamlTokenLines(data []byte) []int {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	var lines []int
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "tokens" {
			continue
		}
		list := m.Content[i+1]
		if list.Kind == yaml.AliasNode {
			list = list.Alias
		}
		for _, e := range list.Content {
			lines = append(lines, e.Line)
		}
	}
	return lines
}

// yamlError is the decoder's error err at its line, as "line N: ..." like the token
// file's other errors: the first of a type error's (an unknown field, a list where a
// string goes) or a syntax error's, its quoted text redacted (it may hold a token).
func yamlError(err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(firstLine(msg), "yaml: ")
	if field, ok := strings.CutSuffix(msg, " not found in type "+entryType); ok {
		msg = field + " is not a token entry's (identity, token, sha256)"
	}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, text, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil && line > 0 {
				return &lineError{line: line, err: fmt.Errorf("yaml: %s", redactQuoted(text))}
			}
		}
	}
	return fmt.Errorf("yaml: %s", redactQuoted(msg))
}

// oneYAMLDocument refuses a document after the one dec decoded, whose tokens would
// otherwise be ignored unsaid. Empty documents (a trailing "---") hold none.
func oneYAMLDocument(dec *yaml.Decoder) error {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return yamlError(err)
		}
		if len(doc.Content) != 1 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
			continue
		}
		return &lineError{line: doc.Content[0].Line, err: errors.New("a second YAML document: a token file holds one (its tokens would be ignored)")}
	}
}

func parseLineTokens(data []byte, add addToken) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return &lineError{line: n, err: fmt.Errorf("want \"<token> <identity>\", got %d fields", len(fields))}
		}
		token, hash := fields[0], ""
		if h, ok := strings.CutPrefix(token, "sha256:"); ok {
			token, hash = "", h
		}
		if err := add(n, "", token, hash, fields[1]); err != nil {
			return err
		}
	}
	return sc.Err()
}

// looksHashed reports whether a plaintext token is a sha256 entry written another way:
// its prefix in another case (SHA256:…), or given as a YAML token. A token of that form
// is refused rather than stored as a secret its author meant as a hash.
func looksHashed(token string) bool {
	prefix, hexDigits, ok := strings.Cut(token, ":")
	if !ok || !strings.EqualFold(prefix, "sha256") || len(hexDigits) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(hexDigits)
	return err == nil
}

// lookup returns the identity of token. Every entry is compared, in constant time, so
// the time taken does not depend on which entry (if any) matched.
func (ts *tokenSet) lookup(token string) (string, bool) {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.entries {
		if subtle.ConstantTimeCompare(h[:], ts.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return ts.entries[found].identity, true
}

// notSendable reports whether r cannot appear in a bearer token a client sends: gRPC
// header values are printable ASCII.
func notSendable(r rune) bool { return r < 0x21 || r > 0x7e }

// checkIdentityName refuses identities that would be ambiguous in grants and logs, or
// that no message could carry.
func checkIdentityName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("identity is empty")
	case !utf8.ValidString(name):
		// It is sent in messages (ListProviders) and logged: protobuf refuses such text.
		return fmt.Errorf("identity %q is not valid UTF-8", name)
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("identity %q contains white space or control characters", name)
	}
	return nil
}

// redactQuoted hides the `quoted` values yaml errors echo: they may be tokens.
func redactQuoted(s string) string {
	parts := strings.Split(s, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = "…"
	}
	return strings.Join(parts, "`")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
