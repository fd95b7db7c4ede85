// Command toolsd runs the tool-execution daemon: flags and a config file in, wiring,
// signals and graceful shutdown out. Everything clever lives in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if !errors.As(err, new(usageError)) { // the flag package has said it, with the usage
			fmt.Fprintln(os.Stderr, "toolsd:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a command line the flag package refused; it has printed the error and
// the usage already.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode is 2 for a command line the flag package refused, as for Go's own commands,
// and 1 for any other failure.
func exitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

func run(args []string) error {
	fs := flag.NewFlagSet("toolsd", flag.ContinueOnError)
	// The flags that set a config key are read through flagOverrides. Given, even empty,
	// each wins over the config file, at start and on reload; the defaults named are
	// defaults.yaml's.
	fs.String("listen", "", "gRPC listen address (overrides listen; default 127.0.0.1:50151)")
	fs.String("admin-listen", "", `admin HTTP listen address for /metrics, /healthz, /readyz; "" for none (overrides admin_listen; default 127.0.0.1:9151)`)
	fs.String("data-dir", "", "directory of the durable session log (overrides data_dir; default ./data)")
	fs.String("log-level", "", "debug | info | warn | error (overrides log.level; default info)")
	fs.String("log-format", "", "json | console (overrides log.format; default json)")
	var (
		configPath   = fs.String("config", "", "YAML config file (defaults are embedded; see -print-defaults)")
		ephemeral    = fs.Bool("ephemeral", false, "keep the session log in memory only: -session-store memory (overrides session.store)")
		sessionStore = fs.String("session-store", "", "bolt | journal | memory (overrides session.store; default bolt)")
		example      = fs.Bool("example-provider", false, "also run the bundled example provider (echo, add, sleep, fail, write_note, ...)")
		notesFile    = fs.String("notes-file", "notes.txt", "file the example provider's write_note appends to")
		printDefault = fs.Bool("print-defaults", false, "print the embedded default config and exit")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	// Parsing stops at the first non-flag: every flag after it would be ignored.
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: toolsd takes only flags (a config file is -config FILE)", fs.Arg(0))
	}
	if *printDefault {
		_, err := os.Stdout.Write(config.Defaults())
		return err
	}
	// The example provider is off without a notes file (app.WithExampleProvider("")).
	if *example && *notesFile == "" {
		return errors.New("-example-provider needs a -notes-file for its write_note (default notes.txt)")
	}
	over, err := flagOverrides(fs, *ephemeral, *sessionStore)
	if err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, over...)
	if err != nil {
		return err
	}
	loaded := *cfg // what a reload, which applies the same flags, compares against
	log, closeLog, err := newLogger(cfg.Log, os.Stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	logOTel(log)
	applyRuntime(cfg.Runtime, log)

	// SIGHUP stays caught until run returns: were it released when shutdown begins, a
	// reload sent during the drain would end the process (Go's default for SIGHUP).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	opts := []app.Option{app.WithLogger(log)}
	if *example {
		opts = append(opts, app.WithExampleProvider(*notesFile))
	}
	a, err := app.New(cfg, opts...)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	term := make(chan os.Signal, 2)
	signal.Notify(term, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(term)
	done := make(chan struct{})
	defer close(done)
	go onTerm(done, term, stop, log, exitAtOnce)
	// A reload in progress when Run returns finishes before the log is closed.
	var reloads sync.WaitGroup
	ran := make(chan struct{})
	reloads.Go(func() { reloadOnHUP(ctx, ran, hup, a, *configPath, over, &loaded, log) })
	waitProcs := adaptProcs(ctx, cfg.Runtime, a.Procs(), log)
	err = a.Run(ctx)
	close(ran)
	stop()
	waitProcs()
	reloads.Wait()
	return err
}

// flagOverrides returns the config keys the flags given on the command line set. A flag
// given overrides the file, even with an empty value: -admin-listen "" turns the admin
// listener off, and -listen "" is refused as the file's would be. They are applied
// before the config is validated, so a file's value a flag replaces is not refused
// (data_dir: "" under -ephemeral), and a bad flag value is reported as the command
// line's.
func flagOverrides(fs *flag.FlagSet, ephemeral bool, sessionStore string) ([]config.Override, error) {
	keys := map[string]struct {
		key string
		set func(*config.Config, string)
	}{
		"listen":        {"listen", func(c *config.Config, v string) { c.Listen = v }},
		"admin-listen":  {"admin_listen", func(c *config.Config, v string) { c.AdminListen = v }},
		"data-dir":      {"data_dir", func(c *config.Config, v string) { c.DataDir = v }},
		"session-store": {"session.store", func(c *config.Config, v string) { c.Session.Store = v }},
		"log-level":     {"log.level", func(c *config.Config, v string) { c.Log.Level = v }},
		"log-format":    {"log.format", func(c *config.Config, v string) { c.Log.Format = v }},
	}
	var over []config.Override
	storeGiven := false
	fs.Visit(func(f *flag.Flag) {
		k, ok := keys[f.Name]
		if !ok {
			return
		}
		v := f.Value.String()
		over = append(over, config.Override{Key: k.key, Source: "command line", Set: func(c *config.Config) { k.set(c, v) }})
		storeGiven = storeGiven || f.Name == "session-store"
	})
	if ephemeral {
		// -ephemeral is the memory store: a -session-store naming another (or none) is
		// a contradiction on the command line, not a value to drop silently.
		if storeGiven && sessionStore != "memory" {
			return nil, fmt.Errorf("-ephemeral keeps the session log in memory, but -session-store says %q: give one of them (or -session-store memory)", sessionStore)
		}
		over = append(over, config.Override{Key: "session.store", Source: "command line", Set: func(c *config.Config) { c.Session.Store = "memory" }})
	}
	return over, nil
}

// onTerm starts the graceful shutdown (stop) at the first SIGINT or SIGTERM, and ends
// the process at once at the second: an operator who pressed Ctrl-C twice does not
// want to wait out the drain. Exiting then is a crash as far as the session log is
// concerned: what was acknowledged is kept, and the calls still running get their
// results when toolsd next starts.
// It returns when done is closed (run returned).
func onTerm(done <-chan struct{}, term <-chan os.Signal, stop func(), log *zap.Logger, exit func(os.Signal)) {
	select {
	case <-done:
		return
	case <-term:
		log.Info("shutdown requested; a second SIGINT or SIGTERM exits at once")
		stop()
	}
	select {
	case <-done:
	case s := <-term:
		log.Warn("second signal: exiting without finishing the drain", zap.String("signal", s.String()))
		exit(s)
	}
}

// exitAtOnce ends the process as the shell reports a death by signal s: 128 + its number.
func exitAtOnce(s os.Signal) {
	code := 1
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	os.Exit(code)
}

// reloadOnHUP re-reads the policy and the auth section's grants and files on each
// signal from hup without dropping in-flight calls, until ctx ends (shutdown). Other
// keys take effect at the next start; the reload names those that changed (see
// config.NotReloaded). A signal that arrives once shutdown began is logged as ignored,
// until ran is closed (Run returned).
func reloadOnHUP(ctx context.Context, ran <-chan struct{}, hup <-chan os.Signal, a *app.App, path string, over []config.Override, loaded *config.Config, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			ignoreHUP(ran, hup, log)
			return
		case <-hup:
			if ctx.Err() != nil {
				// Taken at random against the shutdown, which began while it waited
				// (a reload was running): ignored, as one arriving later is.
				log.Info(hupIgnored)
				continue
			}
			cfg, err := a.ReloadFile(path, over...) //nolint:contextcheck // a reload that began runs to its end, applied whole or refused: a shutdown does not cut its checks short
			if err != nil {
				log.Error("config reload failed; keeping the running policy and credentials", zap.Error(err))
				continue
			}
			log.Info("policy reloaded", zap.String("config", path))
			if changed := config.NotReloaded(loaded, cfg); len(changed) > 0 {
				log.Warn("config keys a reload does not apply changed; they take effect at the next start",
					zap.String("config", path), zap.Strings("keys", changed))
			}
		}
	}
}

// ignoreHUP logs each signal from hup until ran is closed: shutdown has begun, so the
// policy is not reloaded, and the operator who sent it reads why.
func ignoreHUP(ran <-chan struct{}, hup <-chan os.Signal, log *zap.Logger) {
	for {
		select {
		case <-ran:
			return
		case <-hup:
			log.Info(hupIgnored)
		}
	}
}

// hupIgnored is logged for each SIGHUP taken once shutdown began.
const hupIgnored = "config reload ignored: SIGHUP arrived during shutdown"

// newLogger builds the logger writing to w and the function that flushes and stops it.
// Info and debug lines wait in a buffer for at most logFlush (a write per "tool call"
// line would be a write per call); a warning or an error is written at once, with
// everything before it, and Sync flushes.
func newLogger(c config.Log, w *os.File) (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, nil, err
	}
	zc := zap.NewProductionConfig()
	enc := zapcore.NewJSONEncoder(zc.EncoderConfig)
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		enc = zapcore.NewConsoleEncoder(zc.EncoderConfig)
	}
	// Not the presets' sampling: past 100 lines of one message a second it keeps one in
	// 100, which would drop most "tool call" lines (one per call) under load; toolsd
	// bounds its own noisy lines (stray messages) instead. No stack traces either.
	out := zapcore.Lock(fileSyncer{w})
	buf := &zapcore.BufferedWriteSyncer{WS: out, Size: logBuffer, FlushInterval: logFlush}
	core := &flushingCore{zapcore.NewCore(enc, buf, zap.NewAtomicLevelAt(level))}
	opts := []zap.Option{zap.ErrorOutput(out), zap.AddCaller()}
	if zc.Development {
		opts = append(opts, zap.Development())
	}
	return zap.New(core, opts...), func() { _ = buf.Stop() }, nil
}

// The log's buffer: flushed when full, every logFlush, at a warning or worse, and by Sync.
const (
	logBuffer = 64 << 10
	logFlush  = 100 * time.Millisecond
)

// fileSyncer is the log's file without fsync: a flush hands the lines to the kernel,
// which is all a log needs (a crash of toolsd loses nothing written). An fsync per
// flushed warning would cost a disk flush each where stderr is a file, and fails with
// EINVAL where it is a pipe or a terminal, which zap reports as a write error.
type fileSyncer struct{ *os.File }

func (fileSyncer) Sync() error { return nil }

// flushingCore writes a warning or worse, and whatever waits before it, at once. Its
// methods take a pointer: Check hands the core to every line's CheckedEntry as a
// zapcore.Core, and a pointer goes into an interface without an allocation (the struct
// would be copied to the heap, once for every call's log line).
type flushingCore struct{ zapcore.Core }

func (c *flushingCore) With(fields []zapcore.Field) zapcore.Core {
	return &flushingCore{c.Core.With(fields)}
}

func (c *flushingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *flushingCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	err := c.Core.Write(e, fields)
	if e.Level >= zapcore.WarnLevel {
		err = errors.Join(err, c.Sync())
	}
	return err
}
