package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/toolsd/toolsd/internal/auth"
)

const (
	tokenA     = "agent-a-secret-0123456789abcdef"
	tokenP     = "provider-secret-0123456789abcdef"
	tokenHashd = "hashed-secret-0123456789abcdef"
)

func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func tokenServer(t *testing.T, file string) string {
	t.Helper()
	a, _ := mustNew(t, auth.Config{TokenFile: file, Grants: []auth.Grant{{Identity: "*", Role: auth.RoleAgent, Scopes: []string{"**"}}}})
	return startServer(t, a, nil)
}

func TestTokenFile(t *testing.T) {
	lines := writeFile(t, "tokens.txt", []byte("# comment\n\n"+tokenA+" agent-a\n  "+tokenP+"\tprovider-a  \nsha256:"+hashOf(tokenHashd)+" hashed\n"))
	yamlFile := writeFile(t, "tokens.yaml", []byte("# c\ntokens:\n  - identity: agent-a\n    token: "+tokenA+"\n  - identity: provider-a\n    token: "+tokenP+"\n  - identity: hashed\n    sha256: "+hashOf(tokenHashd)+"\n"))
	for format, file := range map[string]string{"lines": lines, "yaml": yamlFile} {
		t.Run(format, func(t *testing.T) {
			conn := dial(t, tokenServer(t, file), nil)
			tests := map[string]struct {
				authz      []string
				want       string
				wantReason string
			}{
				"valid":             {authz: []string{"Bearer " + tokenA}, want: "token:agent-a"},
				"second token":      {authz: []string{"Bearer " + tokenP}, want: "token:provider-a"},
				"hashed entry":      {authz: []string{"Bearer " + tokenHashd}, want: "token:hashed"},
				"scheme any case":   {authz: []string{"bearer " + tokenA}, want: "token:agent-a"},
				"unknown token":     {authz: []string{"Bearer not-a-known-token-0123456789"}, wantReason: auth.ReasonInvalidToken},
				"hash is no token":  {authz: []string{"Bearer " + hashOf(tokenHashd)}, wantReason: auth.ReasonInvalidToken},
				"prefix of a token": {authz: []string{"Bearer " + tokenA[:len(tokenA)-1]}, wantReason: auth.ReasonInvalidToken},
				"missing":           {wantReason: auth.ReasonMissingCredentials},
				"empty bearer":      {authz: []string{"Bearer "}, wantReason: auth.ReasonMissingCredentials},
				"basic scheme":      {authz: []string{"Basic " + tokenA}, wantReason: auth.ReasonInvalidToken},
				"two headers":       {authz: []string{"Bearer " + tokenA, "Bearer " + tokenP}, wantReason: auth.ReasonInvalidToken},
			}
			for name, tc := range tests {
				t.Run(name, func(t *testing.T) {
					for rpc, call := range map[string]func() (string, error){
						"unary":  func() (string, error) { return callUnary(testContext(t), conn, tc.authz...) },
						"stream": func() (string, error) { return callStream(testContext(t), conn, tc.authz...) },
					} {
						got, err := call()
						if tc.wantReason == "" {
							if err != nil || got != tc.want {
								t.Errorf("%s WhoAmI() = %q, %v, want %q", rpc, got, err, tc.want)
							}
							continue
						}
						if code, reason := errReason(err); code != codes.Unauthenticated || reason != tc.wantReason {
							t.Errorf("%s WhoAmI() error = %v (%s), want Unauthenticated %s", rpc, err, reason, tc.wantReason)
						}
						if err != nil && strings.Contains(err.Error(), tokenA) {
							t.Errorf("%s WhoAmI() error %q echoes the token", rpc, err)
						}
					}
				})
			}
		})
	}
}

func TestTokenFileInvalid(t *testing.T) {
	tests := map[string]struct {
		content string
		want    string
	}{
		"empty":                   {content: "# nothing\n", want: "no tokens"},
		"short token":             {content: "short agent-a\n", want: "shorter than 16"},
		"three fields":            {content: tokenA + " agent-a extra\n", want: ":1: want \"<token> <identity>\", got 3 fields"},
		"duplicate":               {content: tokenA + " agent-a\n" + tokenA + " agent-b\n", want: "listed twice"},
		"duplicate via hash":      {content: tokenA + " agent-a\nsha256:" + hashOf(tokenA) + " agent-b\n", want: "listed twice"},
		"bad hash":                {content: "sha256:abcd agent-a\n", want: "64 hex digits"},
		"hash prefix in capitals": {content: "SHA256:" + hashOf(tokenA) + " agent-a\n", want: "looks like a sha256 entry"},
		"yaml hash as a token":    {content: "tokens:\n  - identity: a\n    token: \"sha256:" + hashOf(tokenA) + "\"\n", want: "looks like a sha256 entry"},
		"yaml both":               {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n    sha256: " + hashOf(tokenA) + "\n", want: "not both"},
		"yaml no identity":        {content: "tokens:\n  - token: " + tokenA + "\n", want: "identity is empty"},
		"identity not UTF-8":      {content: tokenA + " prov\xe9der\n", want: `:1: identity "prov\xe9der" is not valid UTF-8`},
		"yaml unknown key":        {content: "tokens:\n  - identity: a\n    secret: " + tokenA + "\n", want: "yaml"},
		"non-ASCII token":         {content: "t\u00f6ken-0123456789abcdef agent-a\n", want: "printable ASCII"},
		"control character":       {content: "token-0123456789\x01abcdef agent-a\n", want: "printable ASCII"},
		"yaml non-ASCII":          {content: "tokens:\n  - identity: a\n    token: \"t\u00f6ken-0123456789abcdef\"\n", want: "printable ASCII"},
		"yaml second doc":         {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n---\ntokens:\n  - identity: b\n    token: " + tokenP + "\n", want: "second YAML document"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, "tokens", []byte(tc.content))
			_, _, err := auth.New(auth.Config{TokenFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
			if !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(token file %q) = %v, want ErrInvalidConfig mentioning %q", name, err, tc.want)
			}
			if strings.Contains(err.Error(), tokenA) {
				t.Errorf("New() error %q echoes a token", err)
			}
		})
	}
	if _, _, err := auth.New(auth.Config{TokenFile: "/nonexistent/tokens", Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}}); !errors.Is(err, auth.ErrInvalidConfig) {
		t.Errorf("New(missing token file) = %v, want ErrInvalidConfig", err)
	}
}

// A token file saved with a UTF-8 byte order mark (as some Windows editors write one)
// holds the same tokens as without it: the mark is no part of the first token, which
// would otherwise never match anything a client can send.
func TestTokenFileWithByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	for format, content := range map[string]string{
		"lines": bom + tokenA + " agent-a\n" + tokenP + " provider-a\n",
		"yaml":  bom + "tokens:\n  - identity: agent-a\n    token: " + tokenA + "\n  - identity: provider-a\n    token: " + tokenP + "\n",
	} {
		t.Run(format, func(t *testing.T) {
			conn := dial(t, tokenServer(t, writeFile(t, "tokens", []byte(content))), nil)
			for token, want := range map[string]string{tokenA: "token:agent-a", tokenP: "token:provider-a"} {
				if got, err := callUnary(testContext(t), conn, "Bearer "+token); err != nil || got != want {
					t.Errorf("WhoAmI() = %q, %v, want %q", got, err, want)
				}
			}
		})
	}
}

// TestTokenFileErrorsSayWhere: an entry a token file refuses is named by file:line (and
// in YAML by its index in tokens), so that it can be found in a long file.
func TestTokenFileErrorsSayWhere(t *testing.T) {
	var long strings.Builder
	for i := range 40 {
		fmt.Fprintf(&long, "%s-%02d agent-%d\n", tokenA, i, i)
	}
	var longYAML strings.Builder
	long.WriteString("# a comment\nshort agent-x\n") // line 42
	longYAML.WriteString("tokens:\n")
	for i := range 40 {
		fmt.Fprintf(&longYAML, "  - identity: agent-%d\n    token: %s-%02d\n", i, tokenA, i)
	}
	longYAML.WriteString("  # a comment\n  - identity: agent-x\n    sha256: abcd\n") // line 83
	tests := map[string]struct {
		content string
		want    string
	}{
		"line":                {content: long.String(), want: ":42: token is shorter than 16 characters"},
		"line duplicate":      {content: "# tokens\n" + tokenA + " agent-a\n\n" + tokenA + " agent-b\n", want: ":4: token listed twice (first at line 2)"},
		"yaml":                {content: longYAML.String(), want: ":83: tokens[40]: sha256 must be 64 hex digits"},
		"yaml flow":           {content: "tokens: [{identity: a, token: " + tokenA + "}, {identity: b, token: short}]\n", want: ":1: tokens[1]: token is shorter than 16 characters"},
		"yaml duplicate":      {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n  - identity: b\n    sha256: " + hashOf(tokenA) + "\n", want: ":4: tokens[1]: token listed twice (first at line 2)"},
		"yaml empty identity": {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n  - token: " + tokenP + "\n", want: ":4: tokens[1]: identity is empty"},
		"yaml second doc":     {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n---\ntokens: []\n", want: ":5: a second YAML document"},
		"yaml unknown field":  {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n    role: agent\n", want: ":4: yaml: field role is not a token entry's (identity, token, sha256)"},
		"yaml wrong type":     {content: "tokens:\n  - identity: a\n    token: [" + tokenA + "]\n", want: ":3: yaml: cannot unmarshal !!seq into string"},
		"yaml syntax":         {content: "tokens:\n  - identity: a\n    token: " + tokenA + "\n  - identity: \"b\n", want: ":4: yaml: found unexpected end of stream"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, "tokens", []byte(tc.content))
			_, _, err := auth.New(auth.Config{TokenFile: file, Grants: []auth.Grant{{Identity: "a", Role: auth.RoleOperator}}})
			if want := "token file " + file + tc.want; !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
				t.Fatalf("New(token file %s) = %v, want ErrInvalidConfig mentioning %q", name, err, want)
			}
		})
	}
}
