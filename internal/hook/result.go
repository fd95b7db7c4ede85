package hook

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// ResultObserver returns the observer that notifies the hooks subscribed to the RESULT
// stage of every final result. It never blocks the call: each notification goes to the
// hook's bounded queue (see [WithResultQueue]), and when that is full it is dropped and
// counted as a fail-open failure of stage "result". A notification that the hook's
// stream ends before it is sent is counted lost ([Observer.NotificationsLost]).
func (h *Hub) ResultObserver() pipeline.ResultObserver {
	return func(e *tool.Exec, r tool.Result, _ time.Duration) {
		hooks := h.subscribed(StageResult, e)
		if len(hooks) == 0 {
			return
		}
		// The call and result serve every hook (they are only read from here on); each
		// hook gets its own message, whose request id its stream's writer sets.
		call, res := hookCall(e), hookResult(&r)
		for _, c := range hooks {
			switch err := c.notify(requestMsg(StageResult, call, res, nil)); {
			case errors.Is(err, errGone):
				// Counted lost by notify.
			case err != nil:
				h.opts.obs.HookFailure(c.hello.name, StageResult.String(), true)
				c.log.Debug("result notification dropped: queue full", zap.String("hook", c.hello.name), zap.String("tool", e.Name), zap.String("call_id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)))
			}
		}
	}
}
