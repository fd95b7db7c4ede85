// Package server is toolsd's gRPC layer: it validates requests, translates between the
// toolsd.v1 contract and the domain packages' plain Go types, and maps domain errors to
// gRPC statuses exactly once on the way out (see [errorTable]). It holds no policy and
// no scheduling logic of its own: registry, scheduler, session and broker do the work.
package server
