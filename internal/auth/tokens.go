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
	"strings"
	"unicode"

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
	if err != nil {
		return nil, configError("token file %s: %v", file, err)
	}
	return ts, nil
}

func parseTokens(data []byte) (*tokenSet, error) {
	// A byte order mark (some editors write one) would otherwise become part of the
	// first token, which then never matches, or hide a YAML file's "tokens:".
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	ts := &tokenSet{}
	seen := map[[sha256.Size]byte]bool{}
	add := func(where, token, hash, identity string) error {
		if err := checkIdentityName(identity); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		var e tokenEntry
		switch {
		case token != "" && hash != "":
			return fmt.Errorf("%s: give either a token or its sha256, not both", where)
		case hash != "":
			b, err := hex.DecodeString(hash)
			if err != nil || len(b) != sha256.Size {
				return fmt.Errorf("%s: sha256 must be %d hex digits", where, 2*sha256.Size)
			}
			copy(e.hash[:], b)
		case len(token) < minTokenLen:
			return fmt.Errorf("%s: token is shorter than %d characters", where, minTokenLen)
		case strings.IndexFunc(token, unicode.IsSpace) >= 0:
			return fmt.Errorf("%s: token contains white space", where)
		case strings.IndexFunc(token, notSendable) >= 0:
			// gRPC refuses to send such a header value: the token could never match.
			return fmt.Errorf("%s: token contains characters other than printable ASCII, which no client can send in a header", where)
		default:
			e.hash = sha256.Sum256([]byte(token))
			ts.plaintext = true
		}
		if seen[e.hash] {
			return fmt.Errorf("%s: token listed twice", where)
		}
		seen[e.hash] = true
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

type addToken func(where, token, hash, identity string) error

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

func parseYAMLTokens(data []byte, add addToken) error {
	var doc struct {
		Tokens []struct {
			Identity string `yaml:"identity"`
			Token    string `yaml:"token"`
			SHA256   string `yaml:"sha256"`
		} `yaml:"tokens"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("yaml: %s", redactQuoted(firstLine(err.Error())))
	}
	if err := oneYAMLDocument(dec); err != nil {
		return err
	}
	for i, t := range doc.Tokens {
		if err := add(fmt.Sprintf("tokens[%d]", i), t.Token, t.SHA256, t.Identity); err != nil {
			return err
		}
	}
	return nil
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
			return fmt.Errorf("yaml: %s", redactQuoted(firstLine(err.Error())))
		}
		if len(doc.Content) != 1 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
			continue
		}
		return fmt.Errorf("yaml: line %d: a second YAML document: a token file holds one (its tokens would be ignored)", doc.Content[0].Line)
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
		where := fmt.Sprintf("line %d", n)
		if len(fields) != 2 {
			return fmt.Errorf("%s: want \"<token> <identity>\", got %d fields", where, len(fields))
		}
		token, hash := fields[0], ""
		if h, ok := strings.CutPrefix(token, "sha256:"); ok {
			token, hash = "", h
		}
		if err := add(where, token, hash, fields[1]); err != nil {
			return err
		}
	}
	return sc.Err()
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

// checkIdentityName refuses identities that would be ambiguous in grants and logs.
func checkIdentityName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("identity is empty")
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
