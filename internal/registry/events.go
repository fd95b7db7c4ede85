package registry

import "sync"

// ChangeKind says what a [Change] reports.
type ChangeKind int

// The kinds of registry change.
const (
	// ChangeRegistered: a tool became registered and visible (including an approved
	// quarantined one).
	ChangeRegistered ChangeKind = iota + 1
	// ChangeUnregistered: a registration (visible or quarantined) was removed.
	ChangeUnregistered
	// ChangeRestricted: a restriction mask was placed on a scope.
	ChangeRestricted
	// ChangeUnrestricted: a restriction mask was lifted.
	ChangeUnrestricted
	// ChangeQuarantined: a registration whose hash differs from its pin was accepted
	// hidden, awaiting [Registry.ApproveQuarantined].
	ChangeQuarantined
)

// String returns the kind in lowercase, as logs and watchers spell it.
func (k ChangeKind) String() string {
	switch k {
	case ChangeRegistered:
		return "registered"
	case ChangeUnregistered:
		return "unregistered"
	case ChangeRestricted:
		return "restricted"
	case ChangeUnrestricted:
		return "unrestricted"
	case ChangeQuarantined:
		return "quarantined"
	default:
		return "unknown"
	}
}

// Change is one registry change as subscribers observe it.
type Change struct {
	Kind ChangeKind
	// Seq increases with every change; subscribers see changes in Seq order.
	Seq   uint64
	Scope string
	// Name and Entry describe the tool of a tool change.
	Name  string
	Entry *Entry
	// RestrictionID, Allow and Deny describe the mask of a restriction change.
	RestrictionID string
	Allow, Deny   []string
}

type subscriber struct {
	id int
	fn func(Change)
}

type subscribers struct {
	mu   sync.Mutex
	next int
	list []subscriber // copy-on-write
}

// Subscribe calls fn for every change, synchronously after the change is applied and
// outside the registry lock, in Seq order. fn may read the registry but must not change
// it (that would deadlock: the change would wait for fn to return) and should return
// quickly, since later changes' deliveries wait for it. The returned cancel is idempotent.
func (r *Registry) Subscribe(fn func(Change)) (cancel func()) {
	s := &r.subs
	s.mu.Lock()
	s.next++
	id := s.next
	s.list = append(s.list[:len(s.list):len(s.list)], subscriber{id: id, fn: fn})
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			list := make([]subscriber, 0, len(s.list))
			for _, sub := range s.list {
				if sub.id != id {
					list = append(list, sub)
				}
			}
			s.list = list
		})
	}
}

func (s *subscribers) snapshot() []subscriber {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list
}

// delivery hands out the order in which change batches reach subscribers: a ticket is
// taken under r.mu, and batches are delivered in ticket order after r.mu is released, so
// a subscriber may read the registry while another change waits for its turn.
type delivery struct {
	mu     sync.Mutex
	cond   *sync.Cond
	issued uint64 // guarded by Registry.mu
	next   uint64 // guarded by mu
}

func (d *delivery) wait(ticket uint64) {
	d.mu.Lock()
	for d.next != ticket {
		d.cond.Wait()
	}
	d.mu.Unlock()
}

func (d *delivery) done() {
	d.mu.Lock()
	d.next++
	d.cond.Broadcast()
	d.mu.Unlock()
}

// unlockAndNotify releases r.mu and delivers changes in the order they were applied.
func (r *Registry) unlockAndNotify(changes []Change) {
	if len(changes) == 0 {
		r.mu.Unlock()
		return
	}
	subs := r.subs.snapshot()
	if len(subs) == 0 {
		r.mu.Unlock()
		return
	}
	ticket := r.delivery.issued
	r.delivery.issued++
	r.mu.Unlock()

	r.delivery.wait(ticket)
	defer r.delivery.done()
	for _, c := range changes {
		for _, sub := range subs {
			sub.fn(c)
		}
	}
}
