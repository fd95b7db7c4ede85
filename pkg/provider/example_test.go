package provider_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/toolsd/toolsd/pkg/provider"
)

type SearchArgs struct {
	Query string `json:"query" description:"What to look for."`
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50,default=10"`
	Sort  string `json:"sort,omitempty" jsonschema:"enum=relevance|date"`
}

func ExampleNewTool() {
	search := provider.NewTool("search", "Searches the catalogue.",
		func(_ context.Context, call provider.Call, args SearchArgs) ([]string, error) {
			call.Progress("searching", 0, 1)
			return []string{"result for " + args.Query}, nil
		})
	fmt.Println(search.Schema())
	// Output:
	// {"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","default":10,"minimum":1,"maximum":50},"sort":{"type":"string","enum":["relevance","date"]}},"required":["query"]}
}

type DivideArgs struct {
	A float64 `json:"a" description:"The dividend."`
	B float64 `json:"b" description:"The divisor."`
}

// A handler fails its call by returning an error: the model sees "Error: division by
// zero" (code TOOL_ERROR), and the value returned with the error is discarded.
func ExampleNewTool_errors() {
	divide := provider.NewTool("divide", "Divides a by b.",
		func(_ context.Context, _ provider.Call, args DivideArgs) (float64, error) {
			if args.B == 0 {
				return 0, errors.New("division by zero")
			}
			return args.A / args.B, nil
		})
	_ = divide
}

type WaitArgs struct {
	Seconds int `json:"seconds" jsonschema:"minimum=1,maximum=60"`
}

// A long-running handler reports progress and stops when its context ends (toolsd
// cancelled the call, or its timeout fired). Returning the context's error says that the
// tool stopped: toolsd records the call as ABORTED (or TOOL_TIMEOUT), not as a failure.
func ExampleNewTool_cancellation() {
	wait := provider.NewTool("wait", "Waits the given number of seconds.",
		func(ctx context.Context, call provider.Call, args WaitArgs) (string, error) {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := range args.Seconds {
				call.Progress(fmt.Sprintf("waited %d s", i), float64(i), float64(args.Seconds))
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-tick.C:
				}
			}
			return fmt.Sprintf("waited %d s", args.Seconds), nil
		}, provider.WithTimeout(2*time.Minute))
	_ = wait
}

func ExampleProvider_Run() {
	// Run returns (nil) once ctx ends and every running handler has returned, or the
	// shutdown grace (WithShutdownGrace, 5 s by default) is over.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	p := provider.New("catalogue", provider.WithVersion("1.0.0"))
	p.Add(provider.NewTool("echo", "Returns the text unchanged.",
		func(_ context.Context, _ provider.Call, args struct {
			Text string `json:"text" description:"The text to return."`
		}) (string, error) {
			return args.Text, nil
		}))
	// Until then it keeps reconnecting, and registering the tools again, whenever the
	// stream to toolsd breaks.
	if err := p.Run(ctx, "127.0.0.1:50151"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// A provider registering into a tenant's scope over TLS, logging through zap.
func ExampleNew_options() {
	log, err := zap.NewProduction()
	if err != nil {
		panic(err)
	}
	p := provider.New("catalogue",
		provider.WithVersion("1.0.0"),
		provider.WithLogger(log),
		provider.WithScope("tenant-a/support"),
		provider.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13}))),
	)
	_ = p
}

// A readiness probe (Kubernetes' readinessProbe on /readyz) that passes while toolsd
// holds every tool of the provider from its current stream, and says which tool is not
// registered and why otherwise.
func ExampleProvider_Registrations() {
	p := provider.New("catalogue")
	p.Add(provider.NewTool("echo", "Returns the text unchanged.",
		func(_ context.Context, _ provider.Call, args struct {
			Text string `json:"text" description:"The text to return."`
		}) (string, error) {
			return args.Text, nil
		}))
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-p.Ready():
		default:
			http.Error(w, "not registered yet", http.StatusServiceUnavailable)
			return
		}
		for _, r := range p.Registrations() {
			if r.State != provider.Registered {
				// For example "tool echo refused: INVALID_ARGUMENT registry: invalid schema: …",
				// or "tool echo pending" while the provider reconnects.
				http.Error(w, fmt.Sprintf("tool %s %s: %s %s", r.Tool, r.State, r.Code, r.Message), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	_ = mux // served beside p.Run(ctx, "127.0.0.1:50151")
}
