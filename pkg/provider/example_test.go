package provider_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

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

func ExampleProvider_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	p := provider.New("catalogue", provider.WithVersion("1.0.0"))
	p.Add(provider.NewTool("echo", "Returns the text unchanged.",
		func(_ context.Context, _ provider.Call, args struct {
			Text string `json:"text" description:"The text to return."`
		}) (string, error) {
			return args.Text, nil
		}))
	if err := p.Run(ctx, "127.0.0.1:50151"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
