package server

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/rpcerr"
)

// sentReasons lists every ErrorInfo reason toolsd's RPCs end with: the error table's,
// and those the stream handlers (rpcerr) and authentication (auth) send themselves.
func sentReasons() []string {
	reasons := []string{
		rpcerr.BadRequest, rpcerr.LimitExceeded, rpcerr.Permission, rpcerr.ShuttingDown,
		rpcerr.StreamClosing, rpcerr.SlowClient, rpcerr.HelloTimeout, rpcerr.FirstMessageTimeout,
		auth.ReasonMissingCredentials, auth.ReasonInvalidToken, auth.ReasonTokenExpired,
		auth.ReasonInvalidCertificate, auth.ReasonCertificateExpired,
	}
	for _, row := range errorTable {
		reasons = append(reasons, row.reason)
	}
	slices.Sort(reasons)
	return slices.Compact(reasons)
}

var reasonSpan = regexp.MustCompile("`([A-Z][A-Z_]+)`")

// readmeReasons lists the reasons the README's table of them (headed "| code | reasons |")
// names in its reasons column.
func readmeReasons(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "| code | reasons |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in:
			cells := strings.Split(line, "|")
			if len(cells) < 3 {
				continue
			}
			for _, m := range reasonSpan.FindAllStringSubmatch(cells[2], -1) {
				reasons = append(reasons, m[1])
			}
		}
	}
	slices.Sort(reasons)
	return slices.Compact(reasons)
}

// TestREADMEListsEveryReason holds the README's table of ErrorInfo reasons to those
// toolsd sends: clients match on reasons, so each one sent is documented, and each one
// documented is sent.
func TestREADMEListsEveryReason(t *testing.T) {
	if diff := cmp.Diff(sentReasons(), readmeReasons(t)); diff != "" {
		t.Errorf("README reasons (-sent +documented):\n%s", diff)
	}
}
