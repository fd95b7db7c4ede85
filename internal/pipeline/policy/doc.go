// Package policy owns the operator's built-in policy from the config file's `policy:`
// section: ordered permission rules (scope and tool globs, an optional CEL condition, a
// decision), guards (the same without a decision: they only deny, after the rules and
// any approval, and nothing turns their denial back into permission) and per-tool
// settings (timeout, concurrency mode or a CEL mode expression, idempotency, result size
// limit). A parsed [Set] is immutable and plugs into the pipeline
// as its [pipeline.Policy] and [pipeline.GuardSource]; a config reload parses a new Set
// and swaps it in, rules and guards together.
//
// The section looks like:
//
//	policy:
//	  default: allow            # allow | deny | ask when every participant abstains
//	  rules:                    # every matching rule is a verdict, combined by pipeline.Combine
//	    - scope: "*"            # glob over the scope path
//	      tool: "echo"          # glob over the whole tool name ("fs_*" matches "fs_a/b")
//	      when: 'args.text.contains("forbidden")'   # optional CEL: args, scope, tool
//	      decision: deny        # allow | deny | ask
//	      reason: "echo may not say forbidden"      # model-facing unless private
//	      user_reason: "..."    # optional user-facing detail
//	      private: false
//	  guards:                   # run in order after the rules and approval; the first match denies
//	    - scope: "**"
//	      tool: "shell"
//	      when: 'args.command.contains("rm -rf")'   # optional, as a rule's
//	      reason: "shell may not rm -rf"            # no decision: a guard only denies
//	  tools:
//	    sleep:      { timeout: 2s }
//	    write_note: { mode: exclusive, idempotent: false, max_result_bytes: 64KiB }
//	    shell:      { mode_when: 'args.command.startsWith("ls") ? "parallel" : "exclusive"' }
//
// Scope globs are matched per '/'-separated segment with path.Match; a "**" segment
// matches any number of segments, and a pattern that is just "*" or "**" matches every
// scope. Tool globs have path.Match's syntax over the whole name, with '/' an ordinary
// character ("fs_*" matches "fs_admin/delete"). Keys of `tools` are exact names. A
// pattern no valid scope or tool name can match, and a key that is no valid name, is
// refused: a deny rule that silently matches nothing fails open.
//
// CEL conditions see `args` (the call's arguments as a map, whose numbers are double
// but for integers of 2^53 or more in magnitude, which are int or uint when they fit),
// `scope` and `tool`; they are type-checked at parse time (conditions to bool, mode
// expressions to string, dyn being checked when evaluated; macros nest at most 8 deep)
// and run under a cost limit. A condition that fails at run time — a missing key, a
// cost overrun — makes its rule or guard deny: the policy fails closed. One the call's
// cancellation interrupts is the cancellation, not a denial. Guard optional fields with
// has(args.x). A failing mode expression makes the call exclusive.
//
// The package never dispatches, blocks or keeps per-call state: evaluation is pure.
package policy
