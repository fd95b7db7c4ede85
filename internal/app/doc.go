// Package app assembles one toolsd process from a [config.Config]: the registry, the
// provider broker, the policy pipeline, the scheduler, the session store, the gRPC and
// admin servers, and graceful shutdown. It is the only package that knows every other
// one; the adapters between their small interfaces live here, so the domain packages
// never import each other sideways.
package app
