// Command harness is toolsd's load benchmark. It drives the same agent workload
// (ExecuteBatch of N no-op calls, until settled) against every [Target] — the raw relay
// (the physical limit of the architecture), toolsd itself (in-memory log, and the bbolt
// and journal durable logs) and the MCP Go SDK peer — interleaving targets inside each
// repetition, and reports medians with their spread, server CPU and allocations per
// call, and the ratios toolsd/raw and toolsd/peer, as a table and as summary.json.
//
// Every server runs as its own process (the harness binary re-executed with -role, or
// the toolsd binary), so its CPU time and memory can be read from /proc without counting
// the agents. The harness owns those processes: they die with it and every run is
// bounded in time. It must never tune a target for the benchmark beyond what a user
// would configure.
//
// Linux only (it reads /proc).
package main
