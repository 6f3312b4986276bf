package store

// Actor is who performs a change and in which request, so that every audit
// record names both.
type Actor struct {
	User      *User
	RequestID string
	// Token names the API token the user acts through, if any: the audit
	// record's actor then reads "Name · token NAME".
	Token string
}

// event starts an audit event by this actor.
func (a Actor) event(action string) AuditEvent {
	e := AuditEvent{Action: action, RequestID: a.RequestID}
	if a.User != nil {
		id := a.User.ID
		e.ActorID = &id
		e.Actor = a.User.DisplayName()
		if a.Token != "" {
			e.Actor += " · token " + a.Token
		}
	}
	return e
}

func (a Actor) userID() *int64 {
	if a.User == nil {
		return nil
	}
	id := a.User.ID
	return &id
}
