package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/internal/streamgate"
)

// ReadSession loads events from the store a page at a time: [session.FirstPage] events
// first, then each page sized by [session.NextPage] from the last page's wire size, at
// most readPage; and a page stops at about [session.PageBytes] (see
// [session.Store.Read]). So a session of small events is read 512 at a time, and one of
// multi-megabyte results, even after a page of small ones, does not hold gigabytes per
// reader.
const readPage = 512

// nextReadPage sizes the page after one of n events that took size bytes on the wire.
func nextReadPage(n, size int) int { return session.NextPage(n, size, readPage) }

// sameEvent reports whether a and b, events of one session id at one seq, are the same
// event: batch ids are unique, so an event of a recreated session differs in its batch
// id, or its time or type.
func sameEvent(a, b *session.Event) bool {
	return a.Seq == b.Seq && a.BatchID == b.BatchID && a.Type == b.Type && a.Time.Equal(b.Time)
}

// mark is what identifies ev for [sameEvent], without its payload.
func mark(ev *session.Event) *session.Event {
	return &session.Event{Seq: ev.Seq, BatchID: ev.BatchID, Type: ev.Type, Time: ev.Time}
}

// readAfter reads up to page events of session id that follow last, the last event
// sent (from seq from when none was). Each read after the first starts at last again:
// a session never loses events, so one whose page lacks last, or has another event at
// its seq, was deleted by retention and its id perhaps taken by a new session; gone
// then reports it, with no events. more reports whether the store may hold more.
func (s *Server) readAfter(ctx context.Context, id string, from uint64, last *session.Event, page int) (events []session.Event, more, gone bool, err error) {
	if last == nil {
		events, err = s.sessions.Read(ctx, id, from, page)
		return events, session.More(events, page), false, err
	}
	events, err = s.sessions.Read(ctx, id, last.Seq, page+1)
	if err != nil {
		return nil, false, false, err
	}
	if len(events) == 0 || !sameEvent(&events[0], last) {
		return nil, false, true, nil
	}
	return events[1:], session.More(events, page+1), false, nil
}

// epochOf is the epoch of the session whose seq-1 event is first: its append time in
// Unix nanoseconds. A session id's lives are told apart by it (clients only compare it),
// and it needs no change to what the stores keep.
func epochOf(first *session.Event) uint64 { return uint64(first.Time.UnixNano()) }

// currentEpoch is the epoch of the session id names now, 0 when it has no events. It
// reads the seq-1 event alone: a cold journal session's from the file, without bringing
// back the rest.
func (s *Server) currentEpoch(ctx context.Context, id string) (uint64, error) {
	first, err := s.sessions.Read(ctx, id, 1, 1)
	if err != nil || len(first) == 0 {
		return 0, err
	}
	return epochOf(&first[0]), nil
}

// epochAt returns the epoch of the session that holds ev, an event of session id that
// the store returned: ev's own time when it is seq 1, else its seq-1 event's. gone
// reports that the session no longer holds ev: retention deleted it, and the id may
// name a new session. ev is read again after seq 1, so that a session holding it then
// held it when seq 1 was read (a deleted session never comes back).
func (s *Server) epochAt(ctx context.Context, id string, ev *session.Event) (epoch uint64, gone bool, err error) {
	if ev.Seq == 1 {
		return epochOf(ev), false, nil
	}
	epoch, err = s.currentEpoch(ctx, id)
	if err != nil || epoch == 0 {
		return 0, err == nil, err
	}
	again, err := s.sessions.Read(ctx, id, ev.Seq, 1)
	if err != nil {
		return 0, false, err
	}
	if len(again) == 0 || !sameEvent(&again[0], ev) {
		return 0, true, nil
	}
	return epoch, false, nil
}

// checkEpoch fails with errSessionRecreated when a request expects an epoch (want is
// not 0) and the session's, got, is another. A session without events (got 0) is not
// checked: it reads as empty, and a watch waits for its events.
func checkEpoch(want, got uint64) error {
	if want != 0 && got != 0 && got != want {
		return fmt.Errorf("%w (epoch %d, expected %d)", errSessionRecreated, got, want)
	}
	return nil
}

// readEpoch returns the epoch of the session whose first page a read got: that of
// the page's first event or, for an empty page, the session's now. gone reports that
// the session was deleted since the page was read.
func (s *Server) readEpoch(ctx context.Context, id string, page []session.Event) (epoch uint64, gone bool, err error) {
	if len(page) == 0 {
		epoch, err = s.currentEpoch(ctx, id)
		return epoch, false, err
	}
	return s.epochAt(ctx, id, &page[0])
}

// ReadSession streams stored events from from_seq, one event per message, each with
// its session's epoch (see [epochOf]); a request that expects another epoch fails with
// FailedPrecondition (SESSION_RECREATED) before anything is sent. A client that stops
// reading is cut off as a watcher is (see [Server.cutSlowReader]).
func (s *Server) ReadSession(req *toolsdv1.ReadSessionRequest, stream grpc.ServerStreamingServer[toolsdv1.ReadSessionResponse]) (err error) {
	ctx := stream.Context()
	if err := s.checkSessionID("session_id", req.GetSessionId()); err != nil {
		return toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionReadSession, "", req.GetSessionId()); err != nil {
		return toStatus(s.log, err)
	}
	from := max(req.GetFromSeq(), 1)
	remaining := int(req.GetLimit())
	want := session.FirstPage
	// last is the last event sent. Retention may delete the session while a slow reader
	// takes a page, and a batch recreate the id, whose seqs start at 1 again: the read
	// then ends with SESSION_DELETED instead of going on with the new session's events
	// (see readAfter).
	var last *session.Event
	var epoch uint64 // the session's, known from the first page on
	var sends streamgate.SendWatch
	slow := s.cutSlowReader(stream, &sends, nil)
	defer func() {
		// The status was written at the cut (which failed the Send under way, if any):
		// this one is for the RPC's log line and metrics, also when the cut came as the
		// last Send returned.
		if slow.stop() {
			err = toStatus(s.log, errSlowClient)
		} else if err != nil {
			// A Send or read that the client's end failed says Canceled for its deadline
			// too (see [clientEnd]); the read ends as soon as the stream does.
			err = toStatus(s.log, (&clientEnd{ctx: ctx}).of(err))
		}
	}()
	for {
		page := want
		if remaining > 0 && remaining < page {
			page = remaining
		}
		events, more, gone, err := s.readAfter(ctx, req.GetSessionId(), from, last, page)
		if err == nil && last == nil {
			// Later pages follow on from the last event sent, so are of its session.
			epoch, gone, err = s.readEpoch(ctx, req.GetSessionId(), events)
		}
		if err != nil {
			return toStatus(s.log, err)
		}
		// Checked again after each read: while a slow reader took the last page,
		// retention may have deleted the session and another identity claimed its id
		// (a claim comes before the claimer's events, so a page holding them fails).
		if err := s.authz.Authorize(ctx, ActionReadSession, "", req.GetSessionId()); err != nil {
			return toStatus(s.log, err)
		}
		if gone {
			return toStatus(s.log, session.ErrDeleted)
		}
		if err := checkEpoch(req.GetExpectEpoch(), epoch); err != nil {
			return toStatus(s.log, err)
		}
		size := 0
		for i := range events {
			m := &toolsdv1.ReadSessionResponse{Event: EventToProto(&events[i]), Epoch: epoch}
			if err := streamgate.Send(&sends, stream.Send, m); err != nil {
				return err
			}
			size += streamgate.SentSize(m)
		}
		// A page ends short of the events asked for once it holds session.PageBytes:
		// sized by the page before, it may meet far larger events than that one held.
		if !more {
			return nil
		}
		want = nextReadPage(len(events), size)
		last = mark(&events[len(events)-1]) // the page and its payloads are not kept
		if remaining > 0 {
			remaining -= len(events)
			if remaining == 0 {
				return nil
			}
		}
	}
}

// slowReader cuts off the client of a server stream whose Sends go through sends, as a
// batch's is: once a Send has waited for longer than the write timeout allows (see
// [sendCheck]), the stream ends with ResourceExhausted (SLOW_CLIENT).
type slowReader struct {
	check *sendCheck
	cut   atomic.Bool // the client was cut off for not reading
}

// cutSlowReader starts checking stream's Sends through sends, which it times by the
// server's send clock; also, if not nil, runs at the cut, before the stream is ended.
// Call it before the first Send, and stop once the handler is done sending.
func (s *Server) cutSlowReader(stream grpc.ServerStream, sends *streamgate.SendWatch, also func()) *slowReader {
	sends.SetClock(s.sendClock)
	r := &slowReader{}
	r.check = startSendCheck(sends, s.limits.WriteTimeout, func() {
		r.cut.Store(true)
		if also != nil {
			also()
		}
		s.endStream(stream, errSlowClient) // ends the Send that waits on the client
	})
	return r
}

// stop ends the checks and reports whether the client was cut off: a cut that came as
// the last Send returned is counted too.
func (r *slowReader) stop() bool {
	r.check.stop()
	return r.cut.Load()
}

// WatchSession replays stored events, then tails live ones until the client cancels,
// each with its session's epoch, checked against the request's as ReadSession does. A
// watch its client ends is Canceled, or DeadlineExceeded for its deadline, in the RPC's
// log line and metrics, as the client reads it.
// A watch opened with a credential that expires ends once it is no longer accepted, as
// a new stream with it would be refused: a JWT with Unauthenticated (TOKEN_EXPIRED), a
// client certificate with Unauthenticated (CERTIFICATE_EXPIRED); the client resumes
// with a fresh one from the next seq and the epoch.
// A client that stops reading is cut off as a batch's is: once a Send has waited for
// longer than the write timeout allows (see [sendCheck]), the watch ends with
// ResourceExhausted (SLOW_CLIENT) and its store watch is released.
// A watch that would take toolsd past Limits.MaxWatches open watches, or its confined
// caller past MaxWatchesPerIdentity, is refused with ResourceExhausted
// (LIMIT_EXCEEDED) before it reads anything; a watch holds its place until it ends.
func (s *Server) WatchSession(req *toolsdv1.WatchSessionRequest, stream grpc.ServerStreamingServer[toolsdv1.WatchSessionResponse]) error {
	ctx := stream.Context()
	if err := s.checkSessionID("session_id", req.GetSessionId()); err != nil {
		return toStatus(s.log, err)
	}
	if err := s.authz.Authorize(ctx, ActionReadSession, "", req.GetSessionId()); err != nil {
		return toStatus(s.log, err)
	}
	// A place among limits.max_watches from before the watch reads anything to the
	// handler's return, however the watch ends (a panic unwinds through the defer too).
	// Its caller is unconfined as its batches are: an agent reads the sessions it
	// executed in, and no agent grant names ActionReadSession, so one granted "**" (or
	// "") would be counted as a tenant's here and as the operator's everywhere else.
	place, err := s.takeWatch(ctx, ActionExecute)
	if err != nil {
		return toStatus(s.log, err)
	}
	defer s.watchSlots.give(place)
	from := max(req.GetFromSeq(), 1)
	next := from
	// Checked before the watch waits for events past the session's last, and again
	// once the store's watch is attached (retention may delete the session in between);
	// the first event sent is checked too (the session may be created again meanwhile).
	var attached func() error
	if want := req.GetExpectEpoch(); want != 0 {
		epoch, err := s.currentEpoch(ctx, req.GetSessionId())
		if err == nil {
			err = checkEpoch(want, epoch)
		}
		if err != nil {
			return toStatus(s.log, err)
		}
		if epoch == 0 {
			// No session holds the id: the next one is checked at its first event, not
			// only once it reaches from_seq (send skips its events before from_seq).
			next = 1
		} else {
			attached = func() error { return s.stillEpoch(ctx, req.GetSessionId(), epoch) }
		}
	}
	// A stopped watch set refuses at once: AfterFunc below would cancel the watch only
	// from its own goroutine, after the replay had begun.
	if s.active.watches.Err() != nil {
		return toStatus(s.log, errShuttingDown)
	}
	watchCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.active.watches, func() { cancel(errShuttingDown) })()
	defer s.cutAtExpiry(ctx, cancel)()
	var sends streamgate.SendWatch
	slow := s.cutSlowReader(stream, &sends, func() { cancel(errSlowClient) })
	defer slow.stop()
	var last *session.Event // what identifies the last event sent
	var epoch uint64        // the session's, known from the first event sent on
	send := func(ev *session.Event) error {
		// Checked again for every event, as ReadSession does for every page: the
		// session may have been deleted by retention or DeleteSession after the watch
		// was authorized and before it attached, and then the watch follows whoever
		// claims the id next; a claim comes before its events.
		if err := s.authz.Authorize(ctx, ActionReadSession, "", req.GetSessionId()); err != nil {
			return err
		}
		// The store's watch ends when retention deletes its session, so every event it
		// sends is of the first one's session.
		if epoch == 0 {
			var err error
			if epoch, err = s.watchEpoch(ctx, req, ev); err != nil {
				return err
			}
		}
		if ev.Seq < from {
			return nil
		}
		if err := streamgate.Send(&sends, stream.Send, &toolsdv1.WatchSessionResponse{Event: EventToProto(ev), Epoch: epoch}); err != nil {
			return err
		}
		next, last = ev.Seq+1, mark(ev)
		return nil
	}
	err = session.WatchAttached(watchCtx, s.sessions, req.GetSessionId(), next, attached, func(ev session.Event) error { return send(&ev) })
	if cause := context.Cause(watchCtx); expired(cause) && errors.Is(err, context.Canceled) {
		err = cause
	}
	// Only a watch that the stop ended goes on with finishWatch: one that ended for its
	// own reason as the stop came (retention deleted the session, the store closed)
	// reports that reason.
	if errors.Is(context.Cause(watchCtx), errShuttingDown) && errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = s.finishWatch(ctx, req.GetSessionId(), next, last, send)
		if err == nil {
			err = errShuttingDown
		}
	}
	// The status was written when the client was cut off: this one is for the RPC's
	// log line and metrics, as for a batch's (see streamFailure).
	if slow.stop() {
		return toStatus(s.log, errSlowClient)
	}
	return s.streamEnd(ctx, err)
}

// stillEpoch fails unless the session id names is still the one of epoch (not 0), as
// a watch found it before its store's watch attached: with ErrDeleted when retention
// deleted it and no session holds the id, as when the deletion comes after the watch
// attached, and with errSessionRecreated when another does. A session deleted in
// between would leave the store watching the id's next session from from_seq, silent
// until that one got there, instead of failing at its first event.
func (s *Server) stillEpoch(ctx context.Context, id string, epoch uint64) error {
	now, err := s.currentEpoch(ctx, id)
	switch {
	case err != nil:
		return err
	case now == 0:
		return session.ErrDeleted
	}
	return checkEpoch(epoch, now)
}

// watchEpoch returns the epoch of the session of ev, the first event a watch sends, and
// fails when it is not the one req expects.
func (s *Server) watchEpoch(ctx context.Context, req *toolsdv1.WatchSessionRequest, ev *session.Event) (uint64, error) {
	epoch, gone, err := s.epochAt(ctx, req.GetSessionId(), ev)
	switch {
	case err != nil:
		return 0, err
	case gone:
		return 0, session.ErrDeleted
	}
	return epoch, checkEpoch(req.GetExpectEpoch(), epoch)
}

// finishWatch sends, once shutdown has stopped a watch, what the session holds past the
// last event the watch sent (last, nil if none; next is the seq after it). Shutdown
// stops watches once the drain is done, and a watch that was behind, even only by the
// wake-up of the drain's last commit, would otherwise end without the drain's results.
// One page at most ([readPage] events, or about [session.PageBytes]): a watcher that
// was still replaying a long session does not hold the shutdown for the rest of it.
// A session that retention deleted meanwhile sends nothing of the id's next session.
func (s *Server) finishWatch(ctx context.Context, id string, next uint64, last *session.Event, send func(*session.Event) error) error {
	events, _, _, err := s.readAfter(ctx, id, next, last, readPage)
	if err != nil {
		return err
	}
	for i := range events {
		if err := send(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkSessionID validates a request's session id; field is its path in the request.
func (s *Server) checkSessionID(field, id string) error {
	if id == "" {
		return badField(field, "is required")
	}
	if len(id) > s.limits.MaxSessionIDLen {
		return badField(field, "is %d bytes, over the limit of %d", len(id), s.limits.MaxSessionIDLen)
	}
	return nil
}

// takeWatch takes a place among limits.max_watches for a WatchSession or WatchSchemas,
// its caller bound by the total alone when [Authorizer.Unconfined] for action. Shutdown is checked first, so that a watch
// refused for both is told to go elsewhere (SHUTTING_DOWN), not to back off
// (LIMIT_EXCEEDED); the caller checks again once it holds the place.
func (s *Server) takeWatch(ctx context.Context, action Action) (slot, error) {
	if s.active.watches.Err() != nil {
		return slot{}, errShuttingDown
	}
	return s.watchSlots.take(ctx, s.authz.Unconfined(ctx, action))
}
