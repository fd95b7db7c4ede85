// Package session is toolsd's durable session log: every tool/call, its tool/result and
// the user/message contexts a batch adds, per session, with dense per-session sequence
// numbers assigned by the store. It owns appending, paged reads, live tailing
// ([Store.Watch]), the tool-history summary conditional tools read, crash recovery and
// retention.
//
// Three stores implement [Store]:
//
//   - [Memory] keeps everything in process memory (tests and --ephemeral). Sessions are
//     sharded: appends to different sessions share at most a shard's read lock.
//   - [Bolt] keeps the log in a single bbolt file under a data directory. One writer
//     goroutine owns every write transaction and group-commits: all appends that queued
//     while the previous commit was in flight are written in one transaction (one
//     round of fdatasync), and their callers are released together. There is no
//     artificial batching delay.
//   - [Journal] writes every change ahead to an append-only file under the data
//     directory, group-committed the same way with one write and one fdatasync per
//     group, and keeps sessions in memory as Memory does, the events of recently active
//     ones only ([WithHotFor]); Open replays the file. Appends and reads of active
//     sessions are much cheaper than Bolt's.
//
// All stores tail sessions with a per-session notifier (a channel closed on each
// append), apply retention ([WithRetention]) on a sweeper goroutine they own, and never
// delete a session that has an open call or that a batch holds ([Store.Hold]).
//
// # Durability modes ([WithDurability])
//
//   - [SyncAlways] (default): every group commit is fdatasynced before any of its
//     Append calls returns. A returned Append survives a process crash and a power loss.
//   - [SyncNone]: bbolt's NoSync, or no fdatasync after the Journal's write; commits
//     reach the OS page cache but are not fsynced.
//     A returned Append survives a crash of the toolsd process (the kernel still writes
//     the pages) but not a kernel crash or power loss, which can lose recent commits or,
//     in the worst case, leave a file that Open reports as corrupt.
//
// # Crash recovery
//
// A tool/call without a tool/result is "open". The Bolt store keeps an index of open
// calls, updated in the same transaction as the appends, so that Open can close every
// call interrupted by a crash with a synthetic ABORTED result (Recovered set) without
// scanning the whole log; the Journal finds them while replaying its file. Interrupted
// calls are never re-run. A crash can tear the Journal's last group write: Open cuts
// off whatever follows the last whole record (those appends were never acknowledged);
// damage that a whole record follows is reported as [ErrCorrupt].
//
// The package never imports gRPC or generated protobuf code, never interprets tool
// arguments (they are stored byte for byte, malformed or not) and never re-orders or
// rewrites an event once it is stored.
package session
