package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/pkg/provider"
)

// Static tokens of the tenancy test's identities.
const (
	tokenAgentA    = "agent-a-token-7f3c2a9e41d05b86"
	tokenAgentB    = "agent-b-token-1e8d4c7b2a6f3095"
	tokenProviderA = "provider-a-token-5b2e9d1c7a4f8e03"
	tokenProviderB = "provider-b-token-c3a71f06e9d24b58"
	tokenOperator  = "operator-token-94e1b7d2c05a3f68"
)

// startTenants runs toolsd with static tokens and the grants of two tenants.
func startTenants(t *testing.T) *env {
	t.Helper()
	return start(t, tenantAuth(t))
}

// tenantAuth is the auth section of the tenancy tests: static tokens and the grants of
// two tenants.
func tenantAuth(t *testing.T) string { return tenantAuthWith(t, "", "") }

// tenantAuthWith is tenantAuth plus more token-file lines ("<token> <identity>\n") and
// grant lines.
func tenantAuthWith(t *testing.T, tokenLines, grantLines string) string {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	lines := fmt.Sprintf("%s agent-a\n%s agent-b\n%s provider-a\n%s provider-b\n%s operator\n",
		tokenAgentA, tokenAgentB, tokenProviderA, tokenProviderB, tokenOperator) + tokenLines
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
auth:
  token_file: %s
  grants:
    - {identity: agent-a, role: agent, scopes: ["tenant-a/**"]}
    - {identity: agent-b, role: agent, scopes: ["tenant-b/**"]}
    - {identity: provider-a, role: provider, scopes: ["tenant-a/**"]}
    - {identity: provider-b, role: provider, scopes: ["tenant-b/**"]}
    - {identity: operator, role: operator}
%s`, tokens, grantLines)
}

// inbox records everything a provider's handler was given.
type inbox struct {
	mu  sync.Mutex
	got []string
}

type textArgs struct {
	Text string `json:"text"`
}

func (in *inbox) tool(name string) provider.Tool {
	return provider.NewTool(name, "Answers with its name.", func(_ context.Context, c provider.Call, a textArgs) (string, error) {
		in.mu.Lock()
		defer in.mu.Unlock()
		in.got = append(in.got, fmt.Sprintf("%+v %+v", c, a))
		return name + ":" + a.Text, nil
	})
}

func (in *inbox) contains(s string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, g := range in.got {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

func TestTenancy(t *testing.T) {
	e := startTenants(t)
	addr := e.app.Addr()
	as := func(token string) *grpc.ClientConn {
		return dialWith(t, addr, grpc.WithPerRPCCredentials(bearer(token)))
	}
	agentA, agentB, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)

	var inA, inB inbox
	runProviderWith(t, addr, []provider.Option{provider.WithScope("tenant-a"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderA)))}, inA.tool("tool_a"))
	runProviderWith(t, addr, []provider.Option{provider.WithScope("tenant-b"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderB)))}, inB.tool("tool_b"))

	denied := func(t *testing.T, what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s = %v, want PermissionDenied", what, err)
		}
	}

	t.Run("credentials", func(t *testing.T) {
		anon := toolsdv1.NewToolServiceClient(e.conn)
		if _, err := anon.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a"}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Schemas() without a token = %v, want Unauthenticated", err)
		}
		bad := toolsdv1.NewToolServiceClient(as("not-a-valid-token-0123456789"))
		if _, err := bad.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a"}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Schemas() with an unknown token = %v, want Unauthenticated", err)
		}
		if _, err := connectRaw(t, e.conn, "anonymous"); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Connect() without a token = %v, want Unauthenticated", err)
		}
		if diff := cmp.Diff(allNamed(healthpb.HealthCheckResponse_SERVING), checkAll(t, e.conn)); diff != "" {
			t.Errorf("health Check() per service without a token (-want +got):\n%s", diff)
		}
		watch, err := healthpb.NewHealthClient(e.conn).Watch(t.Context(), &healthpb.HealthCheckRequest{Service: toolsdv1.ToolService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Watch(%q) without a token = %v, %v, want SERVING", toolsdv1.ToolService_ServiceDesc.ServiceName, resp, err)
		}
	})

	t.Run("providers stay in their tenant", func(t *testing.T) {
		pa, err := connectRaw(t, as(tokenProviderA), "provider-a-raw")
		if err != nil {
			t.Fatalf("Connect() as provider-a = %v", err)
		}
		for _, scope := range []string{"tenant-b", "tenant-b/bot", "", "tenant-ab"} {
			if got := statusCodes(pa.register(t, scope, def("intruder"))); !slices.Equal(got, []string{"PERMISSION_DENIED"}) {
				t.Errorf("provider-a registering into %q = %v, want [PERMISSION_DENIED]", scope, got)
			}
		}
		if got := statusCodes(pa.register(t, "tenant-a/sub", def("own"))); !slices.Equal(got, []string{""}) {
			t.Errorf("provider-a registering into its own tenant = %v, want accepted", got)
		}
		// The unary registration path checks the same grant.
		_, err = toolsdv1.NewToolServiceClient(as(tokenProviderA)).RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{
			Scope: "tenant-b", ProviderId: pa.id, Tool: def("intruder"),
		})
		denied(t, "RegisterTool(tenant-b) as provider-a", err)
		// Nor can another tenant's provider bind a tool to provider-a's stream: agent-b's
		// calls would then run in provider-a's process.
		providerB := toolsdv1.NewToolServiceClient(as(tokenProviderB))
		_, err = providerB.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{Scope: "tenant-b", ProviderId: pa.id, Tool: def("own")})
		denied(t, "RegisterTool(tenant-b, provider-a's stream) as provider-b", err)
		_, err = providerB.UnregisterTool(t.Context(), &toolsdv1.UnregisterToolRequest{Scope: "tenant-a/sub", Name: "own", ProviderId: pa.id})
		denied(t, "UnregisterTool(provider-a's tool) as provider-b", err)
		if names := operator.schemaNames(t, "tenant-b"); slices.Contains(names, "intruder") || slices.Contains(names, "own") {
			t.Errorf("Schemas(tenant-b) = %v, want neither intruder nor own", names)
		}
		// An agent may not register at all.
		_, err = agentA.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{Scope: "tenant-a", ProviderId: pa.id, Tool: def("sneaky")})
		denied(t, "RegisterTool() as agent-a", err)
	})

	t.Run("agents stay in their tenant", func(t *testing.T) {
		_, err := agentA.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-b"})
		denied(t, "Schemas(tenant-b) as agent-a", err)
		_, err = agentA.execute(t, &toolsdv1.Batch{SessionId: "sess-x", Scope: "tenant-b", Calls: []*toolsdv1.ToolCall{call("c", "tool_b", `{"text":"x"}`)}}, batchOptions{})
		denied(t, "ExecuteBatch(tenant-b) as agent-a", err)
		_, err = agentA.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: ""})
		denied(t, `Schemas("") as agent-a`, err)
		if names := agentA.schemaNames(t, "tenant-a"); !slices.Equal(names, []string{"tool_a"}) {
			t.Errorf("Schemas(tenant-a) as agent-a = %v, want [tool_a]", names)
		}
	})

	// agent-a runs its session; provider-b's tool does not exist from tenant-a.
	outA := agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{
		call("c0", "tool_a", `{"text":"hi"}`),
		call("c1", "tool_b", `{"text":"steal"}`),
	}}, batchOptions{})
	if got := resultCodes(outA.results); !slices.Equal(got, []string{"", "UNKNOWN_TOOL"}) {
		t.Errorf("agent-a's batch codes = %v, want [\"\" UNKNOWN_TOOL]", got)
	}
	if inB.contains("steal") {
		t.Error("provider-b received a call from tenant-a")
	}
	outB := agentB.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-b", Scope: "tenant-b/bot", Calls: []*toolsdv1.ToolCall{
		call("c0", "tool_b", `{"text":"b"}`),
	}}, batchOptions{})
	if got := resultCodes(outB.results); !slices.Equal(got, []string{""}) {
		t.Errorf("agent-b's batch codes = %v, want success", got)
	}

	t.Run("sessions belong to their agent", func(t *testing.T) {
		stream, err := agentB.tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "sess-a"})
		if err == nil {
			_, err = stream.Recv()
		}
		denied(t, "ReadSession(sess-a) as agent-b", err)
		watch, err := agentB.tools.WatchSession(t.Context(), &toolsdv1.WatchSessionRequest{SessionId: "sess-a"})
		if err == nil {
			_, err = watch.Recv()
		}
		denied(t, "WatchSession(sess-a) as agent-b", err)
		// Nor can agent-b write into agent-a's session from its own tenant.
		_, err = agentB.execute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-b", Calls: []*toolsdv1.ToolCall{call("c9", "tool_b", `{"text":"x"}`)}}, batchOptions{})
		denied(t, "ExecuteBatch(sess-a) as agent-b", err)
		if n := len(agentA.readSession(t, "sess-a")); n != 4 {
			t.Errorf("ReadSession(sess-a) as agent-a has %d events, want 4", n)
		}
	})

	t.Run("tool sets belong to their tenant", func(t *testing.T) {
		ts, err := agentA.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-a"})
		if err != nil {
			t.Fatalf("ResolveToolSet(tenant-a) as agent-a = %v", err)
		}
		// Another identity's set is an unknown id to agent-b (TestToolSetsAreTheResolversOwn).
		_, err = agentB.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: ts.GetToolSetId()})
		if status.Code(err) != codes.NotFound {
			t.Errorf("ReleaseToolSet(agent-a's set) as agent-b = %v, want NotFound", err)
		}
		_, err = agentB.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a", ToolSetId: ts.GetToolSetId()})
		denied(t, "Schemas(agent-a's set) as agent-b", err)
		out := agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a", ToolSetId: ts.GetToolSetId(),
			Calls: []*toolsdv1.ToolCall{call("c2", "tool_a", `{"text":"set"}`)}}, batchOptions{})
		if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
			t.Errorf("agent-a's batch on its tool set = %v, want success", got)
		}
		if _, err := agentA.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: ts.GetToolSetId()}); err != nil {
			t.Errorf("ReleaseToolSet() as agent-a = %v", err)
		}
	})

	t.Run("operator", func(t *testing.T) {
		if n := len(operator.readSession(t, "sess-a")); n != 6 {
			t.Errorf("ReadSession(sess-a) as operator has %d events, want 6", n)
		}
		if n := len(operator.readSession(t, "sess-b")); n != 2 {
			t.Errorf("ReadSession(sess-b) as operator has %d events, want 2", n)
		}
		_, err := agentA.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "tenant-a/bot", Deny: []string{"tool_a"}})
		denied(t, "Restrict() as agent-a", err)
		if _, err := operator.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "tenant-a/bot", Deny: []string{"tool_a"}}); err != nil {
			t.Fatalf("Restrict() as operator = %v", err)
		}
		if names := agentA.schemaNames(t, "tenant-a/bot"); slices.Contains(names, "tool_a") {
			t.Errorf("Schemas(tenant-a/bot) after the operator's restriction = %v, want no tool_a", names)
		}
	})

	// The agent's credentials never reach a provider.
	for _, tok := range []string{tokenAgentA, tokenAgentB, tokenOperator} {
		if inA.contains(tok) || inB.contains(tok) {
			t.Errorf("a provider received the token %q", tok)
		}
	}
	if !inA.contains("sess-a") {
		t.Error("provider-a never saw agent-a's call: the check above proves nothing")
	}
}

// TestSessionOwnerSurvivesRestart: the owner is recorded in the durable session log, so
// after a restart another tenant's agent can neither take over the session nor read it,
// while its owner still can.
func TestSessionOwnerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	authYAML := tenantAuth(t)
	batch := &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}

	first, cancel, done := runApp(t, durableConfig(t, dir, authYAML))
	conn := dialWith(t, first.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA)))
	(&env{app: first, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}).mustExecute(t, batch, batchOptions{})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first App.Run() = %v", err)
	}

	e := startConfig(t, durableConfig(t, dir, authYAML))
	agentA, agentB := e.as(t, tokenAgentA), e.as(t, tokenAgentB)
	_, err := agentB.execute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-b", Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{}`)}}, batchOptions{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("ExecuteBatch(sess-a) as agent-b after a restart = %v, want PermissionDenied", err)
	}
	stream, err := agentB.tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "sess-a"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("ReadSession(sess-a) as agent-b after a restart = %v, want PermissionDenied", err)
	}
	stream, err = agentA.tools.ReadSession(t.Context(), &toolsdv1.ReadSessionRequest{SessionId: "sess-a"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ReadSession(sess-a) as agent-a after a restart: %v", err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("ReadSession(sess-a) as agent-a after a restart = %d events, want its call and result", n)
	}
	agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a", Step: 2, Calls: []*toolsdv1.ToolCall{call("c2", "nope", `{}`)}}, batchOptions{})
}

// TestDenialBoundsWhatItEchoes: an agent's megabyte of scope is not copied whole into
// the status and the log line. It is refused as malformed (INVALID_SCOPE) before the
// agent's rights in it are looked at, as ExecuteBatch does; the provider stream's is
// TestProviderDenialsAreBounded's.
func TestDenialBoundsWhatItEchoes(t *testing.T) {
	e := startTenants(t)
	agentA := toolsdv1.NewToolServiceClient(dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA))))
	scope := "tenant-b/" + strings.Repeat("x", 1<<20)
	_, schemasErr := agentA.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: scope})
	_, restrictErr := agentA.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: scope, Deny: []string{"t"}})
	_, resolveErr := agentA.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: scope})
	for name, err := range map[string]error{"Schemas": schemasErr, "Restrict": restrictErr, "ResolveToolSet": resolveErr} {
		st, _ := status.FromError(err)
		if st.Code() != codes.InvalidArgument || reason(err) != "INVALID_SCOPE" || len(st.Message()) > 4<<10 {
			t.Errorf("%s(1 MiB scope) as agent-a = %v (%s), %d bytes of message, want InvalidArgument, INVALID_SCOPE, in at most 4 KiB",
				name, st.Code(), reason(err), len(st.Message()))
		}
	}
}

// TestResolveToolSetModelOverItsLimitWhoeverAsks: a model selection field over its 256
// bytes is a malformed request (INVALID_ARGUMENT, BAD_REQUEST naming it) whoever sends
// it, as a malformed scope or session id is and as ExecuteBatch refuses a call id over
// its limit before the caller's rights; it was checked after them, so an agent asking in
// another tenant's scope was told PERMISSION_DENIED, and asking again in its own, told
// of the field only then.
func TestResolveToolSetModelOverItsLimitWhoeverAsks(t *testing.T) {
	e := startTenants(t)
	agentA := toolsdv1.NewToolServiceClient(dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA))))
	for _, scope := range []string{"tenant-a", "tenant-b"} {
		_, err := agentA.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{
			Scope: scope, Model: &toolsdv1.ModelSelection{Model: strings.Repeat("m", 257)},
		})
		if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{"model.model"}) {
			t.Errorf("ResolveToolSet(%q, 257-byte model.model) as agent-a = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming model.model", scope, err, got)
		}
	}
}

// TestProviderDenialsAreBounded: each tool of a registration refused for its scope gets
// a status naming the scope, but not the provider's whole megabyte of scope again: one
// message of a thousand names would otherwise make a reply of gigabytes. (No valid
// scope is that long, so it is refused as malformed, whatever the provider's grant.)
func TestProviderDenialsAreBounded(t *testing.T) {
	e := startTenants(t)
	pa, err := connectRaw(t, dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenProviderA))), "provider-a-raw")
	if err != nil {
		t.Fatalf("Connect() as provider-a = %v", err)
	}
	scope := "tenant-b/" + strings.Repeat("x", 1<<20)
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("t%d", i)
	}
	for i, st := range pa.unregister(t, scope, names...) {
		if st.GetErrorCode() != "INVALID_ARGUMENT" || len(st.GetErrorMessage()) > 4<<10 {
			t.Fatalf("unregister status %d = %s, %d bytes of message, want INVALID_ARGUMENT in at most 4 KiB", i, st.GetErrorCode(), len(st.GetErrorMessage()))
		}
	}
}

// TestSchemasOfAToolSetChecksTheScope: a scope the agent's grant covers but that is not
// a valid scope is refused as one, not repeated whole in a tool set mismatch.
func TestSchemasOfAToolSetChecksTheScope(t *testing.T) {
	e := startTenants(t)
	agentA := toolsdv1.NewToolServiceClient(dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA))))
	ts, err := agentA.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-a"})
	if err != nil {
		t.Fatalf("ResolveToolSet(tenant-a) as agent-a = %v", err)
	}
	_, err = agentA.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a/" + strings.Repeat("x", 1<<20), ToolSetId: ts.GetToolSetId()})
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || len(st.Message()) > 4<<10 {
		t.Errorf("Schemas(1 MiB scope, tool set) as agent-a = %v, %d bytes of message, want InvalidArgument in at most 4 KiB", st.Code(), len(st.Message()))
	}
}

// TestRefusedRegistrationsLogABoundedScope: each refused tool of a register message is
// logged, naming its scope in at most a few KiB, not the provider's whole megabyte.
func TestRefusedRegistrationsLogABoundedScope(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	e := start(t, tenantAuth(t), app.WithLogger(zap.New(core)))
	pa, err := connectRaw(t, dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenProviderA))), "provider-a-raw")
	if err != nil {
		t.Fatalf("Connect() as provider-a = %v", err)
	}
	defs := make([]*toolsdv1.ToolDefinition, 64)
	for i := range defs {
		defs[i] = def(fmt.Sprintf("t%d", i))
	}
	for _, scope := range []string{"tenant-b/", "tenant-a/"} { // refused by the grant, by the registry
		if got := statusCodes(pa.register(t, scope+strings.Repeat("x", 1<<20), defs...)); got[0] == "" {
			t.Fatalf("register into a 1 MiB scope = %v, want refused", got)
		}
	}
	logged := 0
	for _, entry := range logs.All() {
		for _, f := range entry.Context {
			logged += len(f.String)
		}
	}
	if logged > 2<<20 {
		t.Errorf("refusing 128 tools in 1 MiB scopes logged %d bytes of fields, want them bounded", logged)
	}
}

// TestToolSetsAreTheResolversOwn: a tool set is bound to the identity that resolved it.
// Another identity of the same scope holding its id (from a log, a shared cache) cannot
// list it, run a batch with it or release it for everyone: it is answered as an unknown
// id, so it learns nothing of the set either.
func TestToolSetsAreTheResolversOwn(t *testing.T) {
	const tokenAgentA2 = "agent-a2-token-0c9f2e71b84d35a6"
	e := start(t, tenantAuthWith(t, tokenAgentA2+" agent-a2\n", `    - {identity: agent-a2, role: agent, scopes: ["tenant-a/**"]}`+"\n"))
	addr := e.app.Addr()
	agent := func(token string) toolsdv1.ToolServiceClient {
		return toolsdv1.NewToolServiceClient(dialWith(t, addr, grpc.WithPerRPCCredentials(bearer(token))))
	}
	agentA, agentA2 := agent(tokenAgentA), agent(tokenAgentA2)
	var in inbox
	runProviderWith(t, addr, []provider.Option{provider.WithScope("tenant-a"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderA)))}, in.tool("tool_a"))

	ts, err := agentA.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-a"})
	if err != nil {
		t.Fatalf("ResolveToolSet as agent-a = %v", err)
	}
	id := ts.GetToolSetId()
	// What an id nobody resolved gets.
	_, unknownErr := agentA2.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a", ToolSetId: "ts_00000000000000000000000000000000"})
	want := status.Code(unknownErr)
	if want != codes.NotFound {
		t.Fatalf("Schemas(unknown tool set) = %v, want NotFound", unknownErr)
	}
	if _, err := agentA2.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a", ToolSetId: id}); status.Code(err) != want || strings.Contains(err.Error(), "agent-a") {
		t.Errorf("Schemas(agent-a's tool set) as agent-a2 = %v, want %v as for an unknown id", err, want)
	}
	a2 := &env{app: e.app, conn: e.conn, tools: agentA2}
	if _, err := a2.execute(t, &toolsdv1.Batch{SessionId: "s-a2", Scope: "tenant-a", ToolSetId: id,
		Calls: []*toolsdv1.ToolCall{call("c0", "tool_a", `{"text":"x"}`)}}, batchOptions{}); status.Code(err) != want {
		t.Errorf("ExecuteBatch(agent-a's tool set) as agent-a2 = %v, want %v as for an unknown id", err, want)
	}
	if _, err := agentA2.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id}); status.Code(err) != want {
		t.Errorf("ReleaseToolSet(agent-a's tool set) as agent-a2 = %v, want %v as for an unknown id", err, want)
	}
	if in.contains("x") {
		t.Error("agent-a2's batch reached the tool through agent-a's set")
	}
	// The set is untouched for its owner.
	if _, err := agentA.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-a", ToolSetId: id}); err != nil {
		t.Errorf("Schemas(own tool set) as agent-a = %v", err)
	}
	if _, err := agentA.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id}); err != nil {
		t.Errorf("ReleaseToolSet(own tool set) as agent-a = %v", err)
	}
}

// The bundled example provider dials without credentials: with auth on it could never
// register, and would retry, warning, for as long as toolsd runs. It is refused at start.
func TestExampleProviderRefusedWithAuth(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig+tenantAuth(t)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(cfg, app.WithLogger(zaptest.NewLogger(t)), app.WithExampleProvider(filepath.Join(t.TempDir(), "notes.txt")))
	if err == nil || !strings.Contains(err.Error(), "example provider") {
		t.Fatalf("app.New(auth on, example provider) = %v, want the example provider refused", err)
	}
}

// TestProviderScopesThatAreNoScope: a provider confined to its tenant that registers
// into, or unregisters from, a malformed scope is told the scope is malformed
// (INVALID_ARGUMENT for each tool), as the proto documents and as the unary
// RegisterTool answers (INVALID_SCOPE) whoever sends it; a scope out of its grant is
// PERMISSION_DENIED. The grants match no malformed scope, so checking them first
// answered PERMISSION_DENIED for "tenant-a/.." and INVALID_ARGUMENT for
// "tenant-a/x y", one mistake answered two ways.
func TestProviderScopesThatAreNoScope(t *testing.T) {
	e := startTenants(t)
	conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenProviderA)))
	pa, err := connectRaw(t, conn, "provider-a-raw")
	if err != nil {
		t.Fatalf("Connect() as provider-a = %v", err)
	}
	tools := toolsdv1.NewToolServiceClient(conn)
	for _, scope := range []string{"tenant-a/..", "tenant-a/.", "tenant-a//x", "tenant-a/", "/tenant-a", "..", "tenant-a/x y",
		"tenant-b/" + strings.Repeat("x", 1<<20)} {
		short := textcut.Ellipsis(scope, 20)
		if got := statusCodes(pa.register(t, scope, def("t"))); !slices.Equal(got, []string{"INVALID_ARGUMENT"}) {
			t.Errorf("provider-a registering into %q = %v, want [INVALID_ARGUMENT]", short, got)
		}
		if got := statusCodes(pa.unregister(t, scope, "t")); !slices.Equal(got, []string{"INVALID_ARGUMENT"}) {
			t.Errorf("provider-a unregistering from %q = %v, want [INVALID_ARGUMENT]", short, got)
		}
		_, err := tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{Scope: scope, ProviderId: pa.id, Tool: def("t")})
		wantStatus(t, fmt.Sprintf("RegisterTool(%q) as provider-a", short), err, codes.InvalidArgument, "INVALID_SCOPE")
	}
	if got := statusCodes(pa.register(t, "tenant-b", def("t"))); !slices.Equal(got, []string{"PERMISSION_DENIED"}) {
		t.Errorf("provider-a registering into tenant-b = %v, want [PERMISSION_DENIED]", got)
	}
}
