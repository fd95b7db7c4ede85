// Package registry owns toolsd's scoped tool definitions: who registered which tool in
// which scope, what each scope can see (inheritance, shadowing, restriction masks), the
// model-facing schema projection, conditional tools and the per-step tool sets that pin
// them, and the pins that notice a provider silently changing a tool.
//
// A scope is a slash path: "" is the global root, "a" a child of the root, "a/b" a child
// of "a". The visible tools of a scope are its own registrations merged over its parent's
// visible tools filtered by the scope's restriction masks; an own tool shadows an
// inherited one of the same name. A filtered, shadowed or unadmitted conditional tool is
// indistinguishable from one that was never registered.
//
// Every schema is compiled once at registration with no loader: nothing outside the
// submitted document is ever fetched or read. Arguments are parsed with [jsonx] (strict
// JSON) before schema validation.
//
// The registry is pure Go: it never imports gRPC or generated protobuf code, starts no
// goroutines (the caller owns the ticker that calls [Registry.SweepToolSets]) and never
// executes tools.
package registry
