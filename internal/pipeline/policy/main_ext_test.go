package policy_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolsd/toolsd/internal/pipeline/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parseErrorCase is a policy source and the error Parse must give for it: the whole
// message, or its prefix when want ends in "…".
type parseErrorCase struct{ src, want string }

// checkParseErrors parses each case's source as config.yaml and checks its error.
func checkParseErrors(t *testing.T, tests map[string]parseErrorCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := policy.Parse([]byte(tc.src), "config.yaml")
			if err == nil {
				t.Fatalf("Parse(%q) = %v, nil; want error %s", tc.src, s, tc.want)
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Errorf("Parse(%q) error %v does not match ErrInvalid", tc.src, err)
			}
			got := err.Error()
			if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("Parse(%q) error = %s, want prefix %s", tc.src, got, prefix)
				}
			} else if got != tc.want {
				t.Errorf("Parse(%q) error = %s, want %s", tc.src, got, tc.want)
			}
		})
	}
}
