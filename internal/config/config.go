package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/jsonx"
	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/tool"
)

// ErrInvalid wraps every validation failure.
var ErrInvalid = errors.New("config: invalid")

//go:embed defaults.yaml
var defaultsYAML []byte

// Defaults returns the embedded default configuration text.
func Defaults() []byte { return bytes.Clone(defaultsYAML) }

// Config is toolsd's whole configuration.
type Config struct {
	// Listen is the gRPC address.
	Listen string `yaml:"listen"`
	// AdminListen serves /metrics, /healthz and /readyz.
	AdminListen string    `yaml:"admin_listen"`
	Log         Log       `yaml:"log"`
	DataDir     string    `yaml:"data_dir"`
	Session     Session   `yaml:"session"`
	Scheduler   Scheduler `yaml:"scheduler"`
	Registry    Registry  `yaml:"registry"`
	Limits      Limits    `yaml:"limits"`
	Timeouts    Timeouts  `yaml:"timeouts"`
	Retry       Retry     `yaml:"retry"`
	Tracing     Tracing   `yaml:"tracing"`
	Runtime     Runtime   `yaml:"runtime"`
	Debug       Debug     `yaml:"debug"`
	Auth        Auth      `yaml:"auth"`
	Hooks       Hooks     `yaml:"hooks"`
	// Policy is the raw policy section; the policy package parses and validates it.
	Policy yaml.Node `yaml:"policy"`
	// Source names the file the config came from, for error locations.
	Source string `yaml:"-"`
	// places maps the paths the file sets (see [Config.Place]) to their places.
	places map[string]string
}

// Place returns where the config's file sets the value at path (a dotted path as errors
// name keys, a sequence's item as path[i]: "auth.grants[2]") as "file:line:column", or
// "" when the file does not set it: for errors that packages given the config's values
// find in them.
func (c *Config) Place(path string) string { return c.places[path] }

// Log configures zap.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // json | console
	// Payloads logs arguments and results in full at debug level (never at info).
	Payloads bool `yaml:"payloads"`
}

// Session configures the session log.
type Session struct {
	Store      string `yaml:"store"`      // bolt | journal | memory
	Durability string `yaml:"durability"` // sync | nosync
	// Coalesce is how long a batch's ready results may wait for the calls still running
	// before they are appended (durable stores only; the memory store never waits).
	Coalesce Duration `yaml:"coalesce"`
	// HotFor is how long the journal store keeps a session's events in memory after its
	// last append (0: none past the commit); older ones are read back from the file.
	HotFor    Duration `yaml:"hot_for"`
	Retention struct {
		MaxAge      Duration `yaml:"max_age"`
		MaxSessions int      `yaml:"max_sessions"`
		Interval    Duration `yaml:"interval"`
	} `yaml:"retention"`
}

// Scheduler configures batches.
type Scheduler struct {
	MaxParallel int `yaml:"max_parallel"`
}

// Registry configures tool registration.
type Registry struct {
	Pinning     string   `yaml:"pinning"` // off | refuse | quarantine
	ToolSetIdle Duration `yaml:"tool_set_idle"`
}

// Limits bound every input; each has a default in defaults.yaml.
type Limits struct {
	MaxRequestBytes        Size   `yaml:"max_request_bytes"`
	MaxHeaderBytes         Size   `yaml:"max_header_bytes"`
	MaxArgumentBytes       Size   `yaml:"max_argument_bytes"`
	MaxJSONDepth           int    `yaml:"max_json_depth"`
	MaxCallsPerBatch       int    `yaml:"max_calls_per_batch"`
	MaxToolsPerScope       int    `yaml:"max_tools_per_scope"`
	MaxToolsPerProvider    int    `yaml:"max_tools_per_provider"`
	MaxSchemaBytes         Size   `yaml:"max_schema_bytes"`
	MaxResultBytes         Size   `yaml:"max_result_bytes"`
	MaxProviders           int    `yaml:"max_providers"`
	MaxInFlightPerProvider int    `yaml:"max_in_flight_per_provider"`
	MaxConcurrentStreams   uint32 `yaml:"max_concurrent_streams"`
	// MaxConnections caps the open connections of the gRPC listener; one over it is
	// closed as it is accepted. It is read at start: a reload keeps the running value.
	MaxConnections int `yaml:"max_connections"`
	// StreamWindow and ConnectionWindow are fixed HTTP/2 flow-control windows; 0 lets
	// gRPC size them by bandwidth-delay estimation (a ping per burst of data).
	StreamWindow      Size     `yaml:"stream_window"`
	ConnectionWindow  Size     `yaml:"connection_window"`
	ApprovalTimeout   Duration `yaml:"approval_timeout"`
	HookTimeout       Duration `yaml:"hook_timeout"`
	KeepaliveTime     Duration `yaml:"keepalive_time"`
	KeepaliveTimeout  Duration `yaml:"keepalive_timeout"`
	ConnectionTimeout Duration `yaml:"connection_timeout"`
	OutboxSize        int      `yaml:"outbox_size"`
	WriteTimeout      Duration `yaml:"write_timeout"`
	// FirstMessageTimeout is how long an ExecuteBatch stream may take to send its batch,
	// and a provider or hook stream its hello.
	FirstMessageTimeout Duration `yaml:"first_message_timeout"`
	// AcceptedHold is how long a single-call batch holds its accepted message back (and
	// defers reading client messages), so that a quick call's accepted and result leave
	// in one write; 0 sends accepted and reads client messages at once.
	AcceptedHold Duration `yaml:"accepted_hold"`
	// CancelGrace is how long a cancelled call waits for its provider to answer (the
	// tool to stop) before it is recorded ABORTED without the answer; 0 does not wait.
	CancelGrace Duration `yaml:"cancel_grace"`
	// MaxHooks caps the hook streams that may see every tenant's calls (the
	// operator's); MaxScopedHooks, apart, those confined to some scopes.
	MaxHooks       int `yaml:"max_hooks"`
	MaxScopedHooks int `yaml:"max_scoped_hooks"`
	// MaxHooksPerIdentity caps one confined identity's hooks, within MaxScopedHooks.
	MaxHooksPerIdentity int `yaml:"max_hooks_per_identity"`
	// MaxHookContexts and MaxHookContextBytes bound the add_context entries one call
	// keeps from its post-execute hooks together; entries past them are dropped.
	MaxHookContexts     int  `yaml:"max_hook_contexts"`
	MaxHookContextBytes Size `yaml:"max_hook_context_bytes"`
	// MaxBatchContextBytes bounds a batch's additional contexts together, as encoded in
	// its settled message, which must stay within what agent loops can receive.
	MaxBatchContextBytes Size `yaml:"max_batch_context_bytes"`
	// MaxProvidersPerIdentity caps one confined identity's provider streams, within
	// MaxProviders.
	MaxProvidersPerIdentity int `yaml:"max_providers_per_identity"`
	// MaxBatches caps the batches in flight (ExecuteBatch streams that sent their batch
	// and have not ended); MaxBatchesPerIdentity, within it, one confined identity's.
	MaxBatches            int `yaml:"max_batches"`
	MaxBatchesPerIdentity int `yaml:"max_batches_per_identity"`
	// MaxWatches caps the open WatchSession and WatchSchemas streams together;
	// MaxWatchesPerIdentity, within it, one confined identity's.
	MaxWatches            int `yaml:"max_watches"`
	MaxWatchesPerIdentity int `yaml:"max_watches_per_identity"`
	// MaxHealthWatches caps the open health Watch streams of all callers together (the
	// health service needs no credentials, so none is confined).
	MaxHealthWatches int `yaml:"max_health_watches"`
	// MaxToolSetsPerIdentity caps the live tool sets one authenticated identity resolved.
	MaxToolSetsPerIdentity int `yaml:"max_tool_sets_per_identity"`
}

// maxAcceptedHold bounds limits.accepted_hold: it delays a slow single call's accepted
// message and the reading of its client messages, so a typo must not make that minutes.
const maxAcceptedHold = time.Minute

// maxCancelGrace bounds limits.cancel_grace: a cancelled batch settles only after it.
const maxCancelGrace = time.Minute

// maxCoalesce bounds session.coalesce: a batch's early results wait up to it, so a typo
// (5m for 5ms) must not hold them for minutes; a commit takes milliseconds.
const maxCoalesce = time.Second

// maxRequestBytes bounds limits.max_request_bytes: a call's arguments, which the request
// bounds, are logged as sent in one session log event, so they must fit one with room
// for the event's ids and names (a MiB is ample).
const maxRequestBytes = session.DefaultMaxEventBytes - 1<<20

// minKeepaliveTime is the shortest limits.keepalive_time gRPC's server keeps: it raises
// a shorter one to this, saying so only in its own log.
const minKeepaliveTime = time.Second

// minRetentionInterval bounds session.retention.interval: each sweep is a write of the
// session log (a commit, with its fsync under durability sync) that reads every
// session's age, queued with the appends, and one starts again as soon as the last ended
// when the interval is shorter, so a typo (1ms for 1m) would keep the writer sweeping.
const minRetentionInterval = time.Second

// minHeaderBytes bounds limits.max_header_bytes: gRPC's own headers of a request
// (method, path, authority, content type, deadline, user agent), as HTTP/2 counts them
// (32 bytes for each besides its name and value), take about 500 bytes before any
// credential, and a client refuses to send a request whose headers are over the limit.
const minHeaderBytes = 1 << 10

// minRoundTrip bounds limits.keepalive_timeout and limits.connection_timeout, which must
// hold a ping's round trip or a handshake's: gRPC drops a connection whose ping is not
// answered in time, and closes one whose handshake has not finished, live ones too.
const minRoundTrip = 100 * time.Millisecond

// maxOutboxSize bounds limits.outbox_size: every batch stream allocates its queue.
const maxOutboxSize = 1 << 16

// checkWindows: gRPC fixes both flow-control windows or neither, so both are 0 or both
// are sizes, and a connection's window holds at least one stream's.
func (l Limits) checkWindows(bad func(field, format string, args ...any), clash func(field, with, format string, args ...any)) {
	s, c := l.StreamWindow, l.ConnectionWindow
	switch {
	case (s == 0) != (c == 0):
		clash("limits.stream_window", "limits.connection_window",
			"limits.stream_window (%d bytes) and limits.connection_window (%d bytes) must both be 0 (sized by gRPC) or both be set", s, c)
	case s == 0:
	case s < 64<<10 || s > math.MaxInt32:
		bad("limits.stream_window", "must be at least 64KiB and under 2GiB")
	case c > math.MaxInt32:
		bad("limits.connection_window", "must be under 2GiB")
	case c < s:
		clash("limits.connection_window", "limits.stream_window",
			"limits.connection_window (%d bytes) must be at least limits.stream_window (%d bytes)", c, s)
	}
}

// identityCap is a cap on one identity's share of a total: its key and value, and the
// total's.
type identityCap struct {
	field, total string
	n            *int
	max          int
}

// perIdentityCaps pairs each cap on one identity's share with the total it sits within.
func (l *Limits) perIdentityCaps() []identityCap {
	return []identityCap{
		{"limits.max_providers_per_identity", "limits.max_providers", &l.MaxProvidersPerIdentity, l.MaxProviders},
		{"limits.max_hooks_per_identity", "limits.max_scoped_hooks", &l.MaxHooksPerIdentity, l.MaxScopedHooks},
		{"limits.max_batches_per_identity", "limits.max_batches", &l.MaxBatchesPerIdentity, l.MaxBatches},
		{"limits.max_watches_per_identity", "limits.max_watches", &l.MaxWatchesPerIdentity, l.MaxWatches},
	}
}

// followTotals lowers a per-identity cap the user did not set (set reports whether a
// key was) to a total set under its default: lowering max_providers alone then lets one
// identity take every place, as it did before the cap was checked, instead of refusing
// the config. A cap the user set over its total is left for check to refuse. So is
// max_argument_bytes, whose default follows a max_request_bytes set under it: a call's
// arguments arrive in its batch's request.
func (l *Limits) followTotals(set func(key string) bool) {
	for _, p := range l.perIdentityCaps() {
		if p.max > 0 && *p.n > p.max && !set(p.field) {
			*p.n = p.max
		}
	}
	if r := l.MaxRequestBytes; r > 0 && l.MaxArgumentBytes > r && !set("limits.max_argument_bytes") {
		l.MaxArgumentBytes = r
	}
}

// overrides reports whether one of over sets key.
func overrides(over []Override, key string) bool {
	for _, o := range over {
		if o.Key == key {
			return true
		}
	}
	return false
}

// checkPerIdentity: a cap on one identity's share of a total is at most the total,
// which it could never reach otherwise (and which would not keep that identity from
// taking every place, as the cap is meant to).
func (l *Limits) checkPerIdentity(bad func(field, format string, args ...any), clash func(field, with, format string, args ...any)) {
	for _, p := range l.perIdentityCaps() {
		if p.max > 0 && *p.n > p.max {
			clash(p.field, p.total, "%s (%d) is over %s (%d): one identity could never reach it", p.field, *p.n, p.total, p.max)
		}
	}
	if n := l.MaxToolSetsPerIdentity; n > registry.DefaultMaxToolSets {
		bad("limits.max_tool_sets_per_identity", "%d, over the most, %d (the registry's live tool sets)", n, registry.DefaultMaxToolSets)
	}
}

// Timeouts are service-wide deadlines.
type Timeouts struct {
	DefaultTool Duration `yaml:"default_tool"`
	Shutdown    Duration `yaml:"shutdown"`
}

// Retry bounds re-dispatch of calls to tools the policy marks idempotent.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts"`
	Budget      Duration `yaml:"budget"`
	BaseDelay   Duration `yaml:"base_delay"`
	MaxDelay    Duration `yaml:"max_delay"`
}

// Tracing turns on OpenTelemetry; exporters read the standard OTEL_* variables.
type Tracing struct {
	Enabled bool `yaml:"enabled"`
}

// Runtime tunes the Go runtime. toolsd's live heap is small (registry, sessions in
// flight) while it allocates per call, so with Go's default GOGC=100 it collects very
// often; a larger gc_percent trades a bigger (still small) heap for less CPU per call.
// The GOGC and GOMEMLIMIT environment variables, when set, take precedence.
//
// AdaptiveProcs runs toolsd on one P (GOMAXPROCS=1) while one is enough and on every
// CPU once it is not (see internal/procs): one P takes the cross-thread wake-ups out of
// a lone call's latency. A GOMAXPROCS variable, when set, turns it off.
type Runtime struct {
	GCPercent     int  `yaml:"gc_percent"`
	MemoryLimit   Size `yaml:"memory_limit"`
	AdaptiveProcs bool `yaml:"adaptive_procs"`
}

// Debug holds operator diagnostics, all off by default.
type Debug struct {
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin listener. Profiles
	// expose internals (goroutine stacks include call arguments): keep the admin
	// listener on loopback when this is on.
	Pprof bool `yaml:"pprof"`
}

// Auth configures identities and roles; empty means no authentication.
type Auth struct {
	TLS struct {
		CertFile     string `yaml:"cert_file"`
		KeyFile      string `yaml:"key_file"`
		ClientCAFile string `yaml:"client_ca_file"`
	} `yaml:"tls"`
	TokenFile string `yaml:"token_file"`
	JWKSFile  string `yaml:"jwks_file"`
	JWT       struct {
		Issuer   string `yaml:"issuer"`
		Audience string `yaml:"audience"`
	} `yaml:"jwt"`
	Grants []Grant `yaml:"grants"`
}

// AuthOn reports whether the section turns authentication on: a client CA, a token file
// or a JWKS file does.
func (a Auth) AuthOn() bool {
	return a.TLS.ClientCAFile != "" || a.TokenFile != "" || a.JWKSFile != ""
}

// TLSOn reports whether the section turns TLS on: any tls setting does, so that an
// incomplete section is an error rather than a plaintext listener.
func (a Auth) TLSOn() bool {
	return a.TLS.CertFile != "" || a.TLS.KeyFile != "" || a.TLS.ClientCAFile != ""
}

// ReloadsCredentials reports whether a reload to after, in a toolsd started with before,
// applies after's token_file, jwks_file and jwt claims: only while authentication stays
// on (or off) and client certificates stay identities (or not), as at the start.
func ReloadsCredentials(before, after Auth) bool {
	return before.AuthOn() == after.AuthOn() && (before.TLS.ClientCAFile != "") == (after.TLS.ClientCAFile != "")
}

// ReloadsGrants reports whether a reload to after, in a toolsd started with before,
// applies after's grants: only while authentication stays on (grants are then required)
// or off (they are then refused), as at the start, since whether anything is ever
// refused is fixed when toolsd starts.
func ReloadsGrants(before, after Auth) bool { return before.AuthOn() == after.AuthOn() }

// ReloadsTLS reports whether a reload to after, in a toolsd started with before, applies
// after's cert_file, key_file and client_ca_file: only while TLS stays on (or off) and
// client certificates stay required (or not), as at the start.
func ReloadsTLS(before, after Auth) bool {
	return before.TLSOn() == after.TLSOn() && (before.TLS.ClientCAFile != "") == (after.TLS.ClientCAFile != "")
}

// Grant gives an identity a role over scope globs.
type Grant struct {
	Identity string   `yaml:"identity"`
	Role     string   `yaml:"role"` // agent | provider | hook | operator
	Scopes   []string `yaml:"scopes"`
}

// Hooks configures the remote hooks toolsd relies on.
type Hooks struct {
	// Required are hooks that must take part in the calls they cover: while no
	// connected hook meets one, those calls fail closed, and so do the failures of a
	// hook that meets one, whatever its fail_open (see hook.WithRequired).
	Required []RequiredHook `yaml:"required"`
}

// RequiredHook names a hook that must take part in some calls at one stage. What it
// covers is said here, not by the hook's subscriptions: those of a hook that is not
// connected are unknown.
type RequiredHook struct {
	Name  string `yaml:"name"`
	Stage string `yaml:"stage"` // pre_execute | post_execute
	// Tool and Scope are globs as a hook's subscription's; "" matches every tool, every
	// scope.
	Tool  string `yaml:"tool"`
	Scope string `yaml:"scope"`
}

// Requirement is r as the hook hub takes it.
func (r RequiredHook) Requirement() (hook.Requirement, error) {
	return hook.NewRequirement(r.Name, r.Stage, r.Tool, r.Scope)
}

// Override sets one key from outside the config file, such as a command-line flag, over
// what the file and the defaults say.
type Override struct {
	// Key is the key's dotted path as errors name it ("session.store").
	Key string
	// Source names where the value came from ("command line"): a value Validate refuses
	// is reported as its, not as the file's.
	Source string
	// Set writes the value into the config.
	Set func(*Config)
}

// Load reads path (empty = defaults only) over the embedded defaults, then applies over
// before validating: what is checked is the config toolsd runs with, so a file's value
// that an override replaces (data_dir: "" under -ephemeral, which makes the store memory)
// is not refused, and a refused value an override set is reported as the override's.
func Load(path string, over ...Override) (*Config, error) {
	if path == "" {
		return load(nil, "defaults.yaml", over)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if noSettings(data) {
		return nil, fmt.Errorf("%w: %s: holds no settings (run toolsd without -config for the defaults)", ErrInvalid, path)
	}
	return load(data, path, over)
}

// noSettings reports whether data holds no YAML document, or a null one: empty, only
// comments, a lone "---". Such a file would load as the defaults, so one emptied by an
// interrupted write, or a mount not yet filled, would run, or on a reload swap the
// running policy for the default's (allow, no rules), unsaid; an explicit "{}" is kept.
func noSettings(data []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil { // decode reports it
		return false
	}
	return len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null"
}

// Parse decodes data (named source in errors) over the embedded defaults.
func Parse(data []byte, source string) (*Config, error) { return load(data, source, nil) }

func load(data []byte, source string, over []Override) (*Config, error) {
	var cfg Config
	if _, err := decode(defaultsYAML, "defaults.yaml", &cfg); err != nil {
		return nil, err
	}
	root, err := decode(data, source, &cfg)
	if err != nil {
		return nil, err
	}
	cfg.Source = source
	for _, o := range over {
		o.Set(&cfg)
	}
	at := valueNodes(root)
	cfg.Limits.followTotals(func(key string) bool { return at[key] != nil || overrides(over, key) })
	if err := cfg.validateIn(at, over); err != nil {
		return nil, err
	}
	cfg.places = make(map[string]string, len(at))
	for path, n := range at {
		cfg.places[path] = fmt.Sprintf("%s:%d:%d", source, n.Line, n.Column)
	}
	return &cfg, nil
}

// valueNodes maps the path of every value the file set, sequence items included, to its
// node (root is the file's [tree]).
func valueNodes(root *yaml.Node) map[string]*yaml.Node {
	if root == nil {
		return nil
	}
	at := map[string]*yaml.Node{}
	for _, p := range keyPaths(root) {
		at[p.path] = p.value
		if p.value.Kind == yaml.SequenceNode {
			for i, c := range p.value.Content {
				at[fmt.Sprintf("%s[%d]", p.path, i)] = c
			}
		}
	}
	return at
}

// validateIn is Validate for a config whose file set the values at (see [valueNodes]),
// then overridden by over: a refused value an override set is reported as the
// override's source, one the file sets at its place in it ("file:line:column: key: ...").
func (c *Config) validateIn(at map[string]*yaml.Node, over []Override) error {
	errs := c.check()
	if len(errs) == 0 {
		return nil
	}
	by := map[string]string{}
	for _, o := range over {
		by[o.Key] = o.Source
	}
	for _, e := range errs {
		e.locate(by, at)
	}
	return joinFieldErrors(errs)
}

// fieldError is one value Validate refuses, or two that clash.
type fieldError struct {
	source, field, msg string
	line, column       int // where source sets the value; 0 when unknown
	// with is the other key of two that clash ("" for one value's error); msg names
	// both. The error is reported at field's place, else at with's when only with is
	// set (the key the user wrote, not a default's), and also names with's place when
	// both are set.
	with, withAt string
}

// locate places e by the overrides' sources (by key) and the file's values (by path).
func (e *fieldError) locate(by map[string]string, at map[string]*yaml.Node) {
	place := func(key string) (source string, n *yaml.Node, ok bool) {
		if src, ok := by[key]; ok {
			return src, nil, true
		}
		return e.source, at[key], at[key] != nil
	}
	src, n, ok := place(e.field)
	if e.with != "" {
		wsrc, wn, wok := place(e.with)
		switch {
		case !ok && wok:
			e.field, e.with, src, n, ok = e.with, e.field, wsrc, wn, true
		case ok && wok && wn != nil:
			e.withAt = fmt.Sprintf("%s:%d:%d", wsrc, wn.Line, wn.Column)
		case ok && wok:
			e.withAt = wsrc
		}
	}
	if !ok {
		return
	}
	e.source = src
	if n != nil {
		e.line, e.column = n.Line, n.Column
	}
}

func (e *fieldError) Error() string {
	msg := e.msg
	if e.withAt != "" {
		msg += fmt.Sprintf(" (%s: %s)", e.with, e.withAt)
	}
	if e.line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s: %s", e.source, e.line, e.column, e.field, msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.source, e.field, msg)
}

func joinFieldErrors(errs []*fieldError) error {
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = fmt.Errorf("%w: %w", ErrInvalid, e)
	}
	return errors.Join(out...)
}

// decode decodes data over cfg and checks its values; it returns data's [tree], which
// the checks read (nil for an empty file).
func decode(data []byte, source string, cfg *Config) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		if errors.Is(err, errEOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, located(data, source, err))
	}
	if err := oneDocument(dec, source); err != nil {
		return nil, err
	}
	root := tree(data)
	return root, errors.Join(noEmptyValues(root, source), wholeNumbers(root, source))
}

// wholeNumbers refuses a fraction written for an integer key: the decoder truncates it,
// so max_parallel: 1.5 would run with 1 unsaid. A whole number written as a float (1e2)
// is that number. It also refuses an integer with a leading zero, which the decoder
// reads as octal (outbox_size: 0100 is 64) where a size reads it as decimal (100
// bytes): 0o100 says octal. Keys of types that parse their own text (sizes, durations)
// and the policy section, which the policy parser reads, are left to those.
func wholeNumbers(root *yaml.Node, source string) error {
	if root == nil {
		return nil // Decode accepted it: nothing else to say
	}
	var errs []error
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		if t == reflect.TypeFor[yaml.Node]() || reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
			return
		}
		switch {
		case n.Kind == yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, t, path)
			}
		case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				for j := range t.NumField() {
					if key, _, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ","); key == k.Value {
						walk(v, t.Field(j).Type, strings.TrimPrefix(path+"."+key, "."))
					}
				}
			}
		case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
			for i, c := range n.Content {
				walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		case n.Kind == yaml.ScalarNode && n.Tag == "!!float" && (t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64):
			var f float64
			if n.Decode(&f) == nil && (math.IsInf(f, 0) || f != math.Trunc(f)) {
				errs = append(errs, fmt.Errorf("%w: %s:%d:%d: %s: %s is not a whole number",
					ErrInvalid, source, n.Line, n.Column, path, n.Value))
			}
		case n.Kind == yaml.ScalarNode && n.Tag == "!!int" && leadingZero(n.Value):
			errs = append(errs, fmt.Errorf("%w: %s:%d:%d: %s: %s has a leading zero, which YAML reads as octal: write it without (or 0o for octal)",
				ErrInvalid, source, n.Line, n.Column, path, n.Value))
		}
	}
	walk(root, reflect.TypeFor[Config](), "")
	return errors.Join(errs...)
}

// leadingZero reports whether an integer's text has a 0 before its digits ("010",
// "-07", "0_10"), which YAML reads as octal; "0", "0o10" and "0x10" have none.
func leadingZero(text string) bool {
	t := strings.TrimLeft(strings.ReplaceAll(text, "_", ""), "+-")
	return len(t) > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9'
}

// oneDocument refuses a YAML document after the one dec decoded: the decoder reads one
// and stops, so a policy appended after "---" would be dropped unsaid. Empty documents
// (a trailing "---") hold nothing to drop.
func oneDocument(dec *yaml.Decoder, source string) error {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, errEOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, source, err)
		}
		if len(doc.Content) != 1 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
			continue
		}
		at := doc.Content[0]
		return fmt.Errorf("%w: %s:%d:%d: a second YAML document: a config file holds one (toolsd would ignore this one's keys)",
			ErrInvalid, source, at.Line, at.Column)
	}
}

// noEmptyValues refuses a key written without a value ("outbox_size:", "~", "null").
// The decoder leaves such a field as it was, so the setting would silently be the
// default. The policy section is left to the policy parser, for which an empty
// section means "allow, no rules".
func noEmptyValues(root *yaml.Node, source string) error {
	if root == nil {
		return nil // Decode accepted it: nothing else to say
	}
	var errs []error
	empty := func(at *yaml.Node, path string) {
		errs = append(errs, fmt.Errorf("%w: %s:%d:%d: %s: has no value (give one, or leave the key out to keep the default)",
			ErrInvalid, source, at.Line, at.Column, path))
	}
	isNull := func(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }
	for _, p := range keyPaths(root) {
		if p.path == "policy" || strings.HasPrefix(p.path, "policy.") {
			continue
		}
		if isNull(p.value) {
			empty(p.key, p.path)
		}
		if p.value.Kind == yaml.SequenceNode {
			for i, c := range p.value.Content {
				if isNull(c) {
					empty(c, fmt.Sprintf("%s[%d]", p.path, i))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// typeErrorLine splits the decoder's "line 2: cannot unmarshal ..." messages.
var typeErrorLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// unknownField is how the YAML decoder words a key the config does not have.
var unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// duplicateKey is how the YAML decoder words a key written twice in one mapping.
var duplicateKey = regexp.MustCompile(`^mapping key "([^"]*)" already defined at line \d+$`)

// quotedValue finds the value a decoder message quotes: `abc` or "5".
var quotedValue = regexp.MustCompile("`([^`]*)`|\"((?:[^\"\\\\]|\\\\.)*)\"")

// cannotUnmarshal is how the YAML decoder words a value of the wrong type, naming the Go
// type it wanted.
var cannotUnmarshal = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `[^`]*`)? into (.+)$")

// located words a decoding error as the policy's errors are: "file:line:column: key:
// message", the key as its dotted path (limits.max_calls_per_batch), an unknown key as
// "unknown key", a value of the wrong type as what the key wants and what the file
// wrote (see [wanted]). A syntax error, which has no key, keeps the decoder's words.
func located(data []byte, source string, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil { // a syntax error: nothing to locate in
		return fmt.Errorf("%s: %w", source, err)
	}
	pairs := keyPaths(&root)
	var ve *valueError
	if errors.As(err, &ve) {
		for _, p := range pairs {
			if p.value.Line == ve.line && p.value.Column == ve.column {
				return fmt.Errorf("%s:%d:%d: %s: %w", source, ve.line, ve.column, p.path, ve.err)
			}
		}
		return fmt.Errorf("%s: %w", source, err)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", source, err)
	}
	// A value of the wrong type may be a list's item, or the whole document.
	values := slices.Clone(pairs)
	for _, p := range pairs {
		if p.value.Kind == yaml.SequenceNode {
			for i, c := range p.value.Content {
				values = append(values, keyPath{path: fmt.Sprintf("%s[%d]", p.path, i), value: c})
			}
		}
	}
	if len(root.Content) == 1 {
		values = append(values, keyPath{value: root.Content[0]})
	}
	used := map[*yaml.Node]bool{} // the decoder reports values in the file's order
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = locate(values, used, source, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// locate finds the key a decoder message "line N: ..." is about: the unknown or
// duplicate key it names, else the value on that line it quotes (one not used by an
// earlier message first), else the innermost value on that line.
func locate(values []keyPath, used map[*yaml.Node]bool, source, msg string) string {
	sub := typeErrorLine.FindStringSubmatch(msg)
	if sub == nil {
		return source + ": " + msg
	}
	line, text := sub[1], sub[2]
	on := func(n *yaml.Node) bool { return n != nil && fmt.Sprint(n.Line) == line }
	if u := unknownField.FindStringSubmatch(text); u != nil {
		for _, p := range values {
			if on(p.key) && p.key.Value == u[1] {
				return fmt.Sprintf("%s:%d:%d: %s: unknown key", source, p.key.Line, p.key.Column, p.path)
			}
		}
		return fmt.Sprintf("%s: line %s: unknown key %s", source, line, u[1])
	}
	if d := duplicateKey.FindStringSubmatch(text); d != nil {
		var dup *keyPath // the later of the two when both are on the line
		for i := range values {
			if on(values[i].key) && values[i].key.Value == d[1] {
				dup = &values[i]
			}
		}
		if dup != nil {
			return fmt.Sprintf("%s:%d:%d: %s: %s", source, dup.key.Line, dup.key.Column, dup.path, text)
		}
	}
	var found, quotedFound *keyPath
	quoted := quotedValue.FindStringSubmatch(text)
	var kind yaml.Kind // a list or a mapping of the wrong type is quoted by its tag alone
	if u := cannotUnmarshal.FindStringSubmatch(text); u != nil {
		kind = map[string]yaml.Kind{"!!seq": yaml.SequenceNode, "!!map": yaml.MappingNode}[u[1]]
	}
	for i := range values {
		p := &values[i]
		if !on(p.value) {
			continue
		}
		if kind == 0 && quoted != nil && p.value.Kind == yaml.ScalarNode && (quotes(quoted[1], p.value.Value) || p.value.Value == quoted[2]) ||
			kind != 0 && p.value.Kind == kind {
			if quotedFound == nil || used[quotedFound.value] && !used[p.value] {
				quotedFound = p
			}
		}
		if found == nil || len(p.path) > len(found.path) {
			found = p
		}
	}
	if quotedFound != nil {
		found = quotedFound
	}
	if found == nil {
		return source + ": " + msg
	}
	used[found.value] = true
	if u := cannotUnmarshal.FindStringSubmatch(text); u != nil {
		text = wanted(u[2], found.value, text)
	}
	if found.path == "" {
		return fmt.Sprintf("%s:%d:%d: %s", source, found.value.Line, found.value.Column, text)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", source, found.value.Line, found.value.Column, found.path, text)
}

// quotes reports whether the decoder's quote q of a value is value: it cuts a value of
// over 10 bytes to its first 7 and "...".
func quotes(q, value string) bool {
	if len(value) > 10 {
		return q == value[:7]+"..."
	}
	return q == value
}

// wanted words the decoder's refusal of n, a value of the wrong type for the Go type
// goType, in the config's terms: what the key wants and what the file wrote ("want a
// whole number, got \"abc\""), not Go's ("cannot unmarshal !!str `abc` into int"). A
// type it cannot word keeps the decoder's text.
func wanted(goType string, n *yaml.Node, text string) string {
	hint := ""
	var want string
	switch {
	case strings.HasPrefix(goType, "[]"):
		want = "a list"
	case goType == "bool":
		want = "true or false"
	case goType == "string":
		want = "text"
	case goType == "uint32":
		want = fmt.Sprintf("a whole number from 0 to %d", uint32(math.MaxUint32))
	case goType == "int" || goType == "int64":
		want = "a whole number"
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!str" {
			hint = " (out of range)" // a whole number: a fraction is refused before decoding
		}
	case strings.HasPrefix(goType, "config.") || strings.HasPrefix(goType, "struct {"): // a section's
		want = "a mapping of keys"
	default:
		return text
	}
	return fmt.Sprintf("want %s, got %s%s", want, written(n), hint)
}

// DefaultPaths maps every key of the embedded defaults (see [Defaults]) to its value, by
// dotted path as errors name them (a sequence's items as path[i]): for tools that check
// what the documentation says of the config.
func DefaultPaths() (map[string]*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(Defaults(), &root); err != nil {
		return nil, err
	}
	out := map[string]*yaml.Node{}
	for _, p := range keyPaths(&root) {
		out[p.path] = p.value
	}
	return out, nil
}

// tree parses data into the nodes the decoder reads as the config's values: aliases
// replaced by what they name, and merge keys ("<<") by the entries they merge (see
// [resolve]), so that the checks of those values see them where the decoder takes
// them. It is nil when data is not YAML. Only for data the decoder accepted: resolving
// copies what aliases name as often as the decoder read it, which it bounds.
func tree(data []byte) *yaml.Node {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	return resolve(&root, true)
}

// resolve returns a copy of n with every alias replaced by a copy of what it names, at
// the alias's place, and every merge key by the entries it merges (see [entries]). The
// policy section of the top-level mapping (top), which the policy parser reads, is
// kept as written.
func resolve(n *yaml.Node, top bool) *yaml.Node {
	switch n.Kind {
	case yaml.AliasNode:
		r := *resolve(n.Alias, top)
		r.Line, r.Column = n.Line, n.Column
		return &r
	case yaml.DocumentNode, yaml.SequenceNode:
		out := *n
		out.Content = make([]*yaml.Node, len(n.Content))
		for i, c := range n.Content {
			out.Content[i] = resolve(c, top && n.Kind == yaml.DocumentNode)
		}
		return &out
	case yaml.MappingNode:
		out := *n
		out.Content = nil
		for _, e := range entries(n) {
			k, v := e[0], e[1]
			if !top || k.Value != "policy" {
				v = resolve(v, false)
			}
			out.Content = append(out.Content, k, v)
		}
		return &out
	}
	return n
}

// entries lists the keys and values of mapping n as the decoder takes them: its own,
// then those of the mappings its merge keys ("<<") name (a mapping, an alias of one,
// or a list of those) that neither n nor an earlier merged mapping sets. A value left
// out is one the decoder does not read, so it is not resolved.
func entries(n *yaml.Node) [][2]*yaml.Node {
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			own = append(own, [2]*yaml.Node{k, v})
			continue
		}
		sources := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			sources = v.Content
		}
		for _, m := range sources {
			for m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			merged = append(merged, entries(m)...)
		}
	}
	set := make(map[string]bool, len(own))
	for _, e := range own {
		set[e[0].Value] = true
	}
	for _, e := range merged {
		if !set[e[0].Value] {
			set[e[0].Value] = true
			own = append(own, e)
		}
	}
	return own
}

// keyPath is one mapping entry of a config file with its dotted path.
type keyPath struct {
	path       string
	key, value *yaml.Node
}

// keyPaths lists every mapping entry under n, parents before children.
func keyPaths(n *yaml.Node) []keyPath {
	var out []keyPath
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out = append(out, keyPath{path: p, key: k, value: v})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(n, "")
	return out
}

// samePort reports whether two listen addresses ask for one port: the same nonzero port
// on the same host, or on any host when either is every interface's (port 0, or none,
// picks a free port for each). Ports and hosts are compared as net.Listen reads them, so
// that "050151" or a service name is the port it names and "localhost" the address it
// binds.
func samePort(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	na, errA := net.LookupPort("tcp", pa)
	nb, errB := net.LookupPort("tcp", pb)
	if errA != nil || errB != nil || na != nb || na == 0 {
		return false
	}
	everywhere := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	ha, hb = listenHost(ha), listenHost(hb)
	return ha == hb || everywhere(ha) || everywhere(hb)
}

// listenHost is host as net.Listen binds it: "localhost" is the address it resolves
// to (the first IPv4 one, which net.Listen takes; the hosts file answers it), an IP
// address in its usual form, another name as written.
func listenHost(host string) string {
	if strings.EqualFold(host, "localhost") {
		if a, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(host, "0")); err == nil {
			return a.IP.String()
		}
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// Validate checks values the YAML types cannot.
func (c *Config) Validate() error { return joinFieldErrors(c.check()) }

func (c *Config) check() []*fieldError {
	var errs []*fieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &fieldError{source: c.Source, field: field, msg: fmt.Sprintf(format, args...)})
	}
	// clash reports two values valid alone but not together; the message names both.
	clash := func(field, with, format string, args ...any) {
		errs = append(errs, &fieldError{source: c.Source, field: field, with: with, msg: fmt.Sprintf(format, args...)})
	}
	if c.Listen == "" { // net.Listen would pick a random port on every interface
		bad("listen", "must not be empty (a host:port such as 127.0.0.1:50151)")
	}
	for field, addr := range map[string]string{"listen": c.Listen, "admin_listen": c.AdminListen} {
		if addr == "" { // admin_listen: no admin endpoints
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil {
			bad(field, "%v", err)
		} else if _, err := net.LookupPort("tcp", port); err != nil { // as net.Listen reads it
			bad(field, "port %s is not a port number (0 to 65535) or a service name", port)
		}
	}
	if samePort(c.Listen, c.AdminListen) {
		clash("admin_listen", "listen", "admin_listen (%s) is listen's port (%s): the admin HTTP listener needs one of its own", c.AdminListen, c.Listen)
	}
	oneOf := func(field, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad(field, "%q is not one of %v", v, allowed)
	}
	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "json", "console")
	oneOf("session.store", c.Session.Store, "bolt", "journal", "memory")
	if c.DataDir == "" && c.Session.Store != "memory" {
		clash("data_dir", "session.store", "data_dir (\"\") must not be empty with a durable session.store (%q); for the working directory write \".\"", c.Session.Store)
	}
	oneOf("session.durability", c.Session.Durability, "sync", "nosync")
	oneOf("registry.pinning", c.Registry.Pinning, "off", "refuse", "quarantine")
	positive := map[string]int64{
		"scheduler.max_parallel":            int64(c.Scheduler.MaxParallel),
		"limits.max_request_bytes":          int64(c.Limits.MaxRequestBytes),
		"limits.max_header_bytes":           int64(c.Limits.MaxHeaderBytes),
		"limits.max_argument_bytes":         int64(c.Limits.MaxArgumentBytes),
		"limits.max_json_depth":             int64(c.Limits.MaxJSONDepth),
		"limits.max_calls_per_batch":        int64(c.Limits.MaxCallsPerBatch),
		"limits.max_tools_per_scope":        int64(c.Limits.MaxToolsPerScope),
		"limits.max_tools_per_provider":     int64(c.Limits.MaxToolsPerProvider),
		"limits.max_schema_bytes":           int64(c.Limits.MaxSchemaBytes),
		"limits.max_result_bytes":           int64(c.Limits.MaxResultBytes),
		"limits.max_providers":              int64(c.Limits.MaxProviders),
		"limits.max_providers_per_identity": int64(c.Limits.MaxProvidersPerIdentity),
		"limits.max_tool_sets_per_identity": int64(c.Limits.MaxToolSetsPerIdentity),
		"limits.max_batches":                int64(c.Limits.MaxBatches),
		"limits.max_batches_per_identity":   int64(c.Limits.MaxBatchesPerIdentity),
		"limits.max_watches":                int64(c.Limits.MaxWatches),
		"limits.max_watches_per_identity":   int64(c.Limits.MaxWatchesPerIdentity),
		"limits.max_health_watches":         int64(c.Limits.MaxHealthWatches),
		"limits.max_in_flight_per_provider": int64(c.Limits.MaxInFlightPerProvider),
		"limits.max_hooks":                  int64(c.Limits.MaxHooks),
		"limits.max_scoped_hooks":           int64(c.Limits.MaxScopedHooks),
		"limits.max_hooks_per_identity":     int64(c.Limits.MaxHooksPerIdentity),
		"limits.max_hook_contexts":          int64(c.Limits.MaxHookContexts),
		"limits.max_hook_context_bytes":     int64(c.Limits.MaxHookContextBytes),
		"limits.max_batch_context_bytes":    int64(c.Limits.MaxBatchContextBytes),
		"limits.max_concurrent_streams":     int64(c.Limits.MaxConcurrentStreams),
		"limits.max_connections":            int64(c.Limits.MaxConnections),
		"limits.approval_timeout":           int64(c.Limits.ApprovalTimeout),
		"limits.hook_timeout":               int64(c.Limits.HookTimeout),
		"limits.keepalive_time":             int64(c.Limits.KeepaliveTime),
		"limits.keepalive_timeout":          int64(c.Limits.KeepaliveTimeout),
		"limits.connection_timeout":         int64(c.Limits.ConnectionTimeout),
		"limits.outbox_size":                int64(c.Limits.OutboxSize),
		"limits.write_timeout":              int64(c.Limits.WriteTimeout),
		"limits.first_message_timeout":      int64(c.Limits.FirstMessageTimeout),
		"timeouts.default_tool":             int64(c.Timeouts.DefaultTool),
		"timeouts.shutdown":                 int64(c.Timeouts.Shutdown),
		"retry.max_attempts":                int64(c.Retry.MaxAttempts),
		"retry.budget":                      int64(c.Retry.Budget),
		"retry.base_delay":                  int64(c.Retry.BaseDelay),
		"retry.max_delay":                   int64(c.Retry.MaxDelay),
		"runtime.gc_percent":                int64(c.Runtime.GCPercent),
		"registry.tool_set_idle":            int64(c.Registry.ToolSetIdle),
		"session.retention.interval":        int64(c.Session.Retention.Interval),
	}
	for field, v := range positive {
		if v <= 0 {
			bad(field, "must be positive")
		}
	}
	c.Limits.checkWindows(bad, clash)
	c.Limits.checkPerIdentity(bad, clash)
	if k := c.Limits.KeepaliveTime; k > 0 && k < Duration(minKeepaliveTime) {
		bad("limits.keepalive_time", "%v is under %v, the least gRPC pings at", k.D(), minKeepaliveTime)
	}
	if i := c.Session.Retention.Interval; i > 0 && i < Duration(minRetentionInterval) {
		bad("session.retention.interval", "%v is under %v: each sweep is a write of the session log, so sweeping more often keeps its writer busy", i.D(), minRetentionInterval)
	}
	if n := c.Limits.MaxHeaderBytes; n > 0 && n < minHeaderBytes {
		bad("limits.max_header_bytes", "%d bytes, under the least, %d (1KiB): gRPC's own headers of a request take about 500 bytes, and a client sends none over the limit", n, minHeaderBytes)
	}
	if k := c.Limits.KeepaliveTimeout; k > 0 && k < Duration(minRoundTrip) {
		bad("limits.keepalive_timeout", "%v is under %v: a ping's answer takes a round trip, and a connection whose answer comes later is dropped", k.D(), minRoundTrip)
	}
	if k := c.Limits.ConnectionTimeout; k > 0 && k < Duration(minRoundTrip) {
		bad("limits.connection_timeout", "%v is under %v: a connection's handshake takes round trips, and one that has not finished is closed", k.D(), minRoundTrip)
	}
	if h := c.Limits.AcceptedHold; h < 0 || h > Duration(maxAcceptedHold) {
		bad("limits.accepted_hold", "%v is not between 0 and %v", h.D(), maxAcceptedHold)
	}
	if n := c.Limits.MaxRequestBytes; n > maxRequestBytes {
		bad("limits.max_request_bytes", "%d bytes, over the most, %d (15MiB: one call's arguments must fit its session log event)", n, maxRequestBytes)
	}
	if a, r := c.Limits.MaxArgumentBytes, c.Limits.MaxRequestBytes; r > 0 && a > r {
		// A call's arguments arrive in its batch's ExecuteBatch message.
		clash("limits.max_argument_bytes", "limits.max_request_bytes",
			"limits.max_argument_bytes (%d bytes) is over limits.max_request_bytes (%d bytes): a call's arguments arrive in its batch's request, so none could be that large", a, r)
	}
	if n := c.Limits.MaxResultBytes; n > tool.MaxResultBytes {
		bad("limits.max_result_bytes", "%d bytes, over the most, %d (8MiB)", n, tool.MaxResultBytes)
	}
	if n := c.Limits.MaxHookContextBytes; n > tool.MaxResultBytes {
		// A call's contexts are logged one event each, within the session log's limit.
		bad("limits.max_hook_context_bytes", "%d bytes, over the most, %d (8MiB)", n, tool.MaxResultBytes)
	}
	if n := c.Limits.MaxBatchContextBytes; n > tool.MaxResultBytes {
		// The settled message is held to the size of the largest result message.
		bad("limits.max_batch_context_bytes", "%d bytes, over the most, %d (8MiB)", n, tool.MaxResultBytes)
	}
	if g := c.Limits.CancelGrace; g < 0 || g > Duration(maxCancelGrace) {
		bad("limits.cancel_grace", "%v is not between 0 and %v", g.D(), maxCancelGrace)
	}
	if r := c.Retry; r.BaseDelay > r.MaxDelay {
		clash("retry.base_delay", "retry.max_delay", "retry.base_delay (%v) is over retry.max_delay (%v)", r.BaseDelay.D(), r.MaxDelay.D())
	} else if r.Budget < r.BaseDelay/2 { // jitter waits at least half the base delay
		clash("retry.budget", "retry.base_delay", "retry.budget (%v) is under half of retry.base_delay (%v), the shortest wait before a retry: no retry could start",
			r.Budget.D(), r.BaseDelay.D())
	}
	if n := c.Limits.MaxJSONDepth; n > jsonx.MaxDepthCeiling {
		// The strict parser's own ceiling, which would lower a larger setting unsaid.
		bad("limits.max_json_depth", "%d, over the most, %d (the JSON parser goes no deeper)", n, jsonx.MaxDepthCeiling)
	}
	if n := c.Runtime.GCPercent; n > math.MaxInt32 {
		// debug.SetGCPercent takes an int32: 2^31 would wrap to a negative percent,
		// which turns the collector off, and 2^32+100 to 100.
		bad("runtime.gc_percent", "%d, over the most, %d (the Go runtime's GC percent is an int32)", n, math.MaxInt32)
	}
	if n := c.Limits.OutboxSize; n > maxOutboxSize {
		bad("limits.outbox_size", "%d, over the most, %d (each batch stream allocates this many places)", n, maxOutboxSize)
	}
	if k := c.Session.Coalesce; k < 0 || k > Duration(maxCoalesce) {
		bad("session.coalesce", "%v is not between 0 and %v", k.D(), maxCoalesce)
	}
	for field, v := range map[string]int64{
		"session.hot_for":                int64(c.Session.HotFor),
		"session.retention.max_age":      int64(c.Session.Retention.MaxAge),
		"session.retention.max_sessions": int64(c.Session.Retention.MaxSessions),
	} {
		if v < 0 {
			bad(field, "must not be negative")
		}
	}
	for i, g := range c.Auth.Grants {
		oneOf(fmt.Sprintf("auth.grants[%d].role", i), g.Role, "agent", "provider", "hook", "operator")
		if g.Identity == "" {
			bad(fmt.Sprintf("auth.grants[%d].identity", i), "must not be empty")
		}
	}
	c.Auth.check(bad, clash)
	for i, r := range c.Hooks.Required {
		if _, err := r.Requirement(); err != nil {
			bad(fmt.Sprintf("hooks.required[%d]", i), "%v", err)
		}
	}
	return errs
}

// check refuses the auth section's settings that need one another, as the auth package
// and the TLS listener would at start, but with the keys' places in the file.
func (a Auth) check(bad func(field, format string, args ...any), clash func(field, with, format string, args ...any)) {
	t := a.TLS
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		clash("auth.tls.cert_file", "auth.tls.key_file", "auth.tls.cert_file (%q) and auth.tls.key_file (%q) must both be set", t.CertFile, t.KeyFile)
	case t.CertFile == "" && t.ClientCAFile != "":
		clash("auth.tls.client_ca_file", "auth.tls.cert_file",
			"auth.tls.client_ca_file (%q) needs auth.tls.cert_file and auth.tls.key_file (unset): client certificates are verified by the TLS listener", t.ClientCAFile)
	}
	method, value := "", "" // the first key that turns authentication on
	for _, m := range [][2]string{{"auth.tls.client_ca_file", t.ClientCAFile}, {"auth.token_file", a.TokenFile}, {"auth.jwks_file", a.JWKSFile}} {
		if m[1] != "" && method == "" {
			method, value = m[0], m[1]
		}
	}
	switch {
	case method == "" && len(a.Grants) > 0:
		grants := fmt.Sprintf("%d grants need", len(a.Grants))
		if len(a.Grants) == 1 {
			grants = "1 grant needs"
		}
		bad("auth.grants", "%s an authentication method: auth.tls.client_ca_file, auth.token_file or auth.jwks_file (all unset)", grants)
	case method != "" && len(a.Grants) == 0:
		clash(method, "auth.grants", "%s (%q) turns authentication on, but auth.grants is empty: every call would be refused", method, value)
	}
	if a.JWKSFile == "" {
		if a.JWT.Issuer != "" {
			clash("auth.jwt.issuer", "auth.jwks_file", "auth.jwt.issuer (%q) needs auth.jwks_file (\"\"): it is checked in JWTs, which need the keys", a.JWT.Issuer)
		}
		if a.JWT.Audience != "" {
			clash("auth.jwt.audience", "auth.jwks_file", "auth.jwt.audience (%q) needs auth.jwks_file (\"\"): it is checked in JWTs, which need the keys", a.JWT.Audience)
		}
	}
}

// ShutdownTimeout is a convenience accessor.
func (c *Config) ShutdownTimeout() time.Duration { return time.Duration(c.Timeouts.Shutdown) }

// NotReloaded lists the keys whose values differ between two loads of a config file and
// that a reload, which applies the policy and the auth section's grants and files,
// leaves for the next start: the top-level keys other than policy and auth, and of auth:
// grants when the reload would turn authentication on or off (see [ReloadsGrants]), the
// tls keys when it would turn TLS or client certificates on or off (see [ReloadsTLS]),
// and token_file, jwks_file and jwt when it would turn authentication or client
// certificates on or off (see [ReloadsCredentials]). Such a reload reads none of those
// files again, so a file key set in either load is listed even when its path is the
// same: a certificate renewed, or a token revoked, in that file is not in force.
func NotReloaded(before, after *Config) []string {
	var changed []string
	b, a := reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()
	t := b.Type()
	for i := range t.NumField() {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		switch {
		case key == "" || key == "-" || key == "policy":
		case key == "auth":
			changed = append(changed, authNotReloaded(before.Auth, after.Auth)...)
		case !reflect.DeepEqual(b.Field(i).Interface(), a.Field(i).Interface()):
			changed = append(changed, key)
		}
	}
	return changed
}

// authNotReloaded is [NotReloaded] of the auth section.
func authNotReloaded(before, after Auth) []string {
	var changed []string
	differ := func(key string, b, a any, reloaded bool) {
		if !reloaded && !reflect.DeepEqual(b, a) {
			changed = append(changed, key)
		}
	}
	// A file's contents may have changed under the same path: unread, it is named too.
	file := func(key, b, a string, reloaded bool) {
		if !reloaded && (b != "" || a != "") {
			changed = append(changed, key)
		}
	}
	tls := ReloadsTLS(before, after)
	file("auth.tls.cert_file", before.TLS.CertFile, after.TLS.CertFile, tls)
	file("auth.tls.key_file", before.TLS.KeyFile, after.TLS.KeyFile, tls)
	file("auth.tls.client_ca_file", before.TLS.ClientCAFile, after.TLS.ClientCAFile, tls)
	creds := ReloadsCredentials(before, after)
	file("auth.token_file", before.TokenFile, after.TokenFile, creds)
	file("auth.jwks_file", before.JWKSFile, after.JWKSFile, creds)
	differ("auth.jwt", before.JWT, after.JWT, creds)
	differ("auth.grants", before.Grants, after.Grants, ReloadsGrants(before, after))
	return changed
}
