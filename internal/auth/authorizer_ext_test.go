package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/auth"
)

var testGrants = []auth.Grant{
	{Identity: "agent-a", Role: auth.RoleAgent, Scopes: []string{"tenant-a/**"}},
	{Identity: "agent-*", Role: auth.RoleAgent, Scopes: []string{"sandbox/*"}},
	{Identity: "provider-a", Role: auth.RoleProvider, Scopes: []string{"tenant-a/**"}},
	{Identity: "provider-all", Role: auth.RoleProvider, Scopes: []string{"**"}},
	{Identity: "provider-global", Role: auth.RoleProvider, Scopes: []string{""}},
	{Identity: "hook-a", Role: auth.RoleHook, Scopes: []string{"tenant-a/**"}},
	{Identity: "hook-all", Role: auth.RoleHook, Scopes: []string{"**"}},
	{Identity: "hook-global", Role: auth.RoleHook, Scopes: []string{""}},
	{Identity: "operator", Role: auth.RoleOperator},
	{Identity: "op-a", Role: auth.RoleOperator, Scopes: []string{"tenant-a/**"}},
	{Identity: "spiffe://toolsd.test/agents/*", Role: auth.RoleAgent, Scopes: []string{"tenant-s/**"}},
}

func asIdentity(name string) context.Context {
	return auth.NewContext(context.Background(), auth.Identity{Name: name, Method: auth.MethodToken})
}

func newAuthorizer(t *testing.T, opts ...auth.Option) *auth.Authorizer {
	t.Helper()
	_, z := mustNew(t, auth.Config{MTLS: true, Grants: testGrants}, opts...)
	return z
}

func TestAuthorizeScopes(t *testing.T) {
	z := newAuthorizer(t)
	all := []auth.Action{auth.ReadTools, auth.Execute, auth.Register, auth.Restrict, auth.Subscribe, auth.Admin}
	// allowed lists, per identity and scope, the actions that must pass; every other
	// action of all must be denied.
	tests := map[string]struct {
		identity, scope string
		allowed         []auth.Action
	}{
		"agent in its tenant":            {identity: "agent-a", scope: "tenant-a", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"agent deep in its tenant":       {identity: "agent-a", scope: "tenant-a/bot/x", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"agent in another tenant":        {identity: "agent-a", scope: "tenant-b/bot"},
		"agent in a look-alike tenant":   {identity: "agent-a", scope: "tenant-ab"},
		"agent climbing out":             {identity: "agent-a", scope: "tenant-a/../tenant-b"},
		"agent in global":                {identity: "agent-a", scope: ""},
		"agent glob grant":               {identity: "agent-b", scope: "sandbox/x", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"agent glob grant one level":     {identity: "agent-b", scope: "sandbox/x/y"},
		"agent glob grant union":         {identity: "agent-a", scope: "sandbox/x", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"agent glob other tenant":        {identity: "agent-b", scope: "tenant-a/bot"},
		"spiffe agent":                   {identity: "spiffe://toolsd.test/agents/bot1", scope: "tenant-s/x", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"spiffe glob is one segment":     {identity: "spiffe://toolsd.test/agents/x/bot1", scope: "tenant-s/x"},
		"provider in its tenant":         {identity: "provider-a", scope: "tenant-a/bot", allowed: []auth.Action{auth.Register}},
		"provider in another tenant":     {identity: "provider-a", scope: "tenant-b"},
		"provider in global":             {identity: "provider-a", scope: ""},
		"provider ** not global":         {identity: "provider-all", scope: ""},
		"provider ** elsewhere":          {identity: "provider-all", scope: "tenant-b/x", allowed: []auth.Action{auth.Register}},
		"provider granted global":        {identity: "provider-global", scope: "", allowed: []auth.Action{auth.Register}},
		"provider granted global only":   {identity: "provider-global", scope: "tenant-a"},
		"hook in its tenant":             {identity: "hook-a", scope: "tenant-a/x", allowed: []auth.Action{auth.Subscribe}},
		"hook in another tenant":         {identity: "hook-a", scope: "tenant-b"},
		"hook ** not global":             {identity: "hook-all", scope: ""},
		"hook granted global":            {identity: "hook-global", scope: "", allowed: []auth.Action{auth.Subscribe}},
		"operator anywhere":              {identity: "operator", scope: "tenant-b/x", allowed: all},
		"operator in global":             {identity: "operator", scope: "", allowed: all},
		"scoped operator in its tenant":  {identity: "op-a", scope: "tenant-a/x", allowed: all},
		"scoped operator in another":     {identity: "op-a", scope: "tenant-b"},
		"scoped operator in global":      {identity: "op-a", scope: ""},
		"unknown identity":               {identity: "mallory", scope: "tenant-a"},
		"identity named like a glob":     {identity: "agent-*", scope: "sandbox/x", allowed: []auth.Action{auth.ReadTools, auth.Execute}},
		"operator name prefix is no op":  {identity: "operator2", scope: "tenant-a"},
		"anonymous is nobody when authn": {identity: auth.Anonymous, scope: "tenant-a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, action := range all {
				want := false
				for _, a := range tc.allowed {
					want = want || a == action
				}
				err := z.Authorize(asIdentity(tc.identity), action, tc.scope, "")
				if want && err != nil {
					t.Errorf("Authorize(%s, %v, %q) = %v, want nil", tc.identity, action, tc.scope, err)
				}
				if !want && !errors.Is(err, auth.ErrPermissionDenied) {
					t.Errorf("Authorize(%s, %v, %q) = %v, want ErrPermissionDenied", tc.identity, action, tc.scope, err)
				}
			}
		})
	}
}

func TestDenialMessage(t *testing.T) {
	z := newAuthorizer(t)
	tests := map[string]struct {
		identity string
		action   auth.Action
		scope    string
		want     string
	}{
		"execute": {identity: "agent-b", action: auth.Execute, scope: "tenant-a/bot", want: `auth: identity "agent-b" may not execute in scope "tenant-a/bot"`},
		"global":  {identity: "provider-all", action: auth.Register, scope: "", want: `auth: identity "provider-all" may not register tools in scope "": the global scope reaches every tenant`},
		"nobody":  {identity: "mallory", action: auth.ReadTools, scope: "x", want: `auth: identity "mallory" may not read tools in scope "x": no grant names this identity`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := z.Authorize(asIdentity(tc.identity), tc.action, tc.scope, "")
			var de *auth.DeniedError
			if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Authorize() = %v, want a DeniedError starting %q", err, tc.want)
			}
		})
	}
}

func TestAllowRegisterGlobal(t *testing.T) {
	z := newAuthorizer(t)
	tests := map[string]struct {
		identity, scope string
		wantErr         bool
	}{
		"provider into global without grant": {identity: "provider-a", scope: "", wantErr: true},
		"provider with ** into global":       {identity: "provider-all", scope: "", wantErr: true},
		"provider granted global":            {identity: "provider-global", scope: ""},
		"operator into global":               {identity: "operator", scope: ""},
		"provider into own scope":            {identity: "provider-a", scope: "tenant-a"},
		"provider into other tenant":         {identity: "provider-a", scope: "tenant-b", wantErr: true},
		"agent cannot register":              {identity: "agent-a", scope: "tenant-a", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := z.AllowRegister(asIdentity(tc.identity), tc.scope)
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, auth.ErrPermissionDenied)) {
				t.Fatalf("AllowRegister(%s, %q) = %v, want error %v", tc.identity, tc.scope, err, tc.wantErr)
			}
		})
	}
}

func TestSessionOwnership(t *testing.T) {
	z := newAuthorizer(t)
	a, b := asIdentity("agent-a"), asIdentity("agent-b")
	read := func(ctx context.Context, sid string) error { return z.Authorize(ctx, auth.ReadSession, "", sid) }

	if err := read(a, "s1"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Fatalf("ReadSession(agent-a, unowned s1) = %v, want ErrPermissionDenied", err)
	}
	if err := z.Authorize(a, auth.ReadTools, "tenant-a/bot", "s1"); err != nil {
		t.Fatalf("ReadTools(agent-a, unowned s1) = %v, want nil (does not claim)", err)
	}
	if err := z.Authorize(a, auth.Execute, "tenant-a/bot", "s1"); err != nil {
		t.Fatalf("Execute(agent-a, s1) = %v, want nil", err)
	}
	if err := read(a, "s1"); err != nil {
		t.Errorf("ReadSession(agent-a, own s1) = %v, want nil", err)
	}
	if err := z.Authorize(a, auth.Execute, "sandbox/x", "s1"); err != nil {
		t.Errorf("Execute(agent-a, own s1, other granted scope) = %v, want nil", err)
	}
	// agent-b may execute in sandbox/x, but s1 is agent-a's.
	// Reading another identity's session and one nobody owns yet are refused alike, so
	// that a refusal does not tell which session ids are in use.
	var other, unowned *auth.DeniedError
	if !errors.As(read(b, "s1"), &other) || !errors.As(read(b, "never-used"), &unowned) || other.Why != unowned.Why {
		t.Errorf("ReadSession refusals of another's and of an unowned session differ: %v / %v", other, unowned)
	}
	for name, err := range map[string]error{
		"Execute":      z.Authorize(b, auth.Execute, "sandbox/x", "s1"),
		"ReadTools":    z.Authorize(b, auth.ReadTools, "sandbox/x", "s1"),
		"ClaimSession": z.ClaimSession("agent-b", "s1"),
	} {
		if !errors.Is(err, auth.ErrPermissionDenied) || !strings.Contains(err.Error(), "belongs to another identity") {
			t.Errorf("%s(agent-b, agent-a's s1) = %v, want ErrPermissionDenied: belongs to another identity", name, err)
		}
	}
	for name, ctx := range map[string]context.Context{"operator": asIdentity("operator"), "operator of tenant-a": asIdentity("op-a")} {
		if err := read(ctx, "s1"); err != nil {
			t.Errorf("ReadSession(%s, s1) = %v, want nil", name, err)
		}
	}
	if err := z.Authorize(asIdentity("operator"), auth.Execute, "tenant-a/bot", "s1"); err != nil {
		t.Errorf("Execute(operator, agent-a's s1) = %v, want nil", err)
	}
	// A session claimed in sandbox/x is not tenant-a's operator's business.
	if err := z.Authorize(b, auth.Execute, "sandbox/x", "s2"); err != nil {
		t.Fatalf("Execute(agent-b, s2) = %v", err)
	}
	if err := read(asIdentity("op-a"), "s2"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(operator of tenant-a, sandbox session) = %v, want ErrPermissionDenied", err)
	}
	if err := read(a, "s2"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(agent-a, agent-b's s2) = %v, want ErrPermissionDenied", err)
	}
	// ClaimSession is idempotent for the owner; ForgetSession frees the id.
	if err := z.ClaimSession("agent-a", "s1"); err != nil {
		t.Errorf("ClaimSession(agent-a, own s1) = %v, want nil", err)
	}
	z.ForgetSession("s1")
	if err := z.ClaimSession("agent-b", "s1"); err != nil {
		t.Errorf("ClaimSession(agent-b, forgotten s1) = %v, want nil", err)
	}
	if err := read(a, "s1"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(agent-a, s1 now agent-b's) = %v, want ErrPermissionDenied", err)
	}
	// An operator that only claimed via ClaimSession (scope unknown) is readable by global operators only.
	if err := z.ClaimSession("agent-a", "s3"); err != nil {
		t.Fatal(err)
	}
	if err := read(asIdentity("op-a"), "s3"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(operator of tenant-a, scope-less claim) = %v, want ErrPermissionDenied", err)
	}
	if got := z.OwnedSessions(); got != 3 {
		t.Errorf("OwnedSessions() = %d, want 3", got)
	}
}

func TestSessionOwnershipCap(t *testing.T) {
	z := newAuthorizer(t, auth.WithMaxOwnedSessions(2))
	a := asIdentity("agent-a")
	for i := range 2 {
		if err := z.Authorize(a, auth.Execute, "tenant-a", fmt.Sprint("s", i)); err != nil {
			t.Fatalf("Execute(s%d) = %v", i, err)
		}
	}
	if err := z.Authorize(a, auth.Execute, "tenant-a", "s2"); !errors.Is(err, auth.ErrOwnershipFull) {
		t.Fatalf("Execute(third session at cap 2) = %v, want ErrOwnershipFull", err)
	}
	if err := z.Authorize(a, auth.Execute, "tenant-a", "s0"); err != nil {
		t.Errorf("Execute(owned session at cap) = %v, want nil", err)
	}
	z.ForgetSession("s0")
	if err := z.Authorize(a, auth.Execute, "tenant-a", "s2"); err != nil {
		t.Errorf("Execute(after ForgetSession) = %v, want nil", err)
	}
}

func TestAuthorizeWithoutIdentity(t *testing.T) {
	z := newAuthorizer(t)
	if err := z.Authorize(context.Background(), auth.ReadTools, "tenant-a", ""); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("Authorize(no identity) = %v, want ErrPermissionDenied", err)
	}
	if _, err := z.ScopeFilter(context.Background(), auth.Subscribe); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ScopeFilter(no identity) = %v, want ErrPermissionDenied", err)
	}
}

func TestUnconfined(t *testing.T) {
	z := newAuthorizer(t)
	tests := map[string]struct {
		identity string
		action   auth.Action
		want     bool
	}{
		"tenant hook":               {identity: "hook-a", action: auth.Subscribe},
		"** hook":                   {identity: "hook-all", action: auth.Subscribe, want: true},
		"global hook":               {identity: "hook-global", action: auth.Subscribe, want: true},
		"operator":                  {identity: "operator", action: auth.Subscribe, want: true},
		"tenant operator":           {identity: "op-a", action: auth.Subscribe},
		"** provider subscribing":   {identity: "provider-all", action: auth.Subscribe},
		"** provider registering":   {identity: "provider-all", action: auth.Register, want: true},
		"agent has no subscription": {identity: "agent-a", action: auth.Subscribe},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := z.Unconfined(asIdentity(tc.identity), tc.action); got != tc.want {
				t.Errorf("Unconfined(%s, %v) = %t, want %t", tc.identity, tc.action, got, tc.want)
			}
		})
	}
	if z.Unconfined(context.Background(), auth.Subscribe) {
		t.Error("Unconfined(no identity) = true, want false")
	}
}

func TestScopeFilter(t *testing.T) {
	z := newAuthorizer(t)
	tests := map[string]struct {
		identity string
		in, out  []string
		wantErr  bool
	}{
		"tenant hook":    {identity: "hook-a", in: []string{"tenant-a", "tenant-a/x"}, out: []string{"", "tenant-b", "tenant-ab"}},
		"** hook":        {identity: "hook-all", in: []string{"tenant-a", "tenant-b/x"}, out: []string{""}},
		"global hook":    {identity: "hook-global", in: []string{""}, out: []string{"tenant-a"}},
		"operator":       {identity: "operator", in: []string{"", "tenant-b"}},
		"agent has none": {identity: "agent-a", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := z.ScopeFilter(asIdentity(tc.identity), auth.Subscribe)
			if tc.wantErr {
				if !errors.Is(err, auth.ErrPermissionDenied) {
					t.Fatalf("ScopeFilter(%s) = %v, want ErrPermissionDenied", tc.identity, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ScopeFilter(%s) = %v", tc.identity, err)
			}
			for _, s := range tc.in {
				if !f(s) {
					t.Errorf("ScopeFilter(%s)(%q) = false, want true", tc.identity, s)
				}
			}
			for _, s := range tc.out {
				if f(s) {
					t.Errorf("ScopeFilter(%s)(%q) = true, want false", tc.identity, s)
				}
			}
		})
	}
}
