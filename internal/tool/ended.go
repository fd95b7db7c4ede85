package tool

import (
	"context"
	"time"
)

// Ended reports whether ctx has ended, or has passed its deadline while the timer that
// ends it has yet to run. That timer's callback is a goroutine like any other and may
// run late under load; meanwhile a call must neither start nor be sent (its provider
// would get a deadline already past), and a provider's report that it stopped at that
// deadline is the caller's cancel, not a failure of the tool.
func Ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
