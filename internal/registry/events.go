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
// it (that would deadlock) and should return quickly: it delays the next change. The
// returned cancel is idempotent.
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

// unlockAndNotify releases r.mu and delivers changes. notifyMu is taken before r.mu is
// released, so deliveries happen in the order the changes were applied.
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
	r.notifyMu.Lock()
	r.mu.Unlock()
	defer r.notifyMu.Unlock()
	for _, c := range changes {
		for _, sub := range subs {
			sub.fn(c)
		}
	}
}
