package store

import "strings"

// InstallationAdmins is the configured list of installation admins
// (STUDIO_ADMINS): emails or subjects.
type InstallationAdmins []string

// Names reports whether the list names the identity: by its subject, or by
// its email when the identity provider verified it.
func (l InstallationAdmins) Names(subject, email string, emailVerified bool) bool {
	for _, a := range l {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if a == subject || (emailVerified && email != "" && strings.EqualFold(a, email)) {
			return true
		}
	}
	return false
}

// SetInstallationAdmins makes list the truth about who is an installation
// admin for every user loaded from now on (UserByID: each request's user,
// by session or by token), whatever flag was stored at their last
// sign-in: someone removed from the list loses the power at their next
// request, not their next sign-in. The built-in local administrator stays
// one. Until it is called, the stored flag stands (stores without a web
// application: tests, tools).
func (db *DB) SetInstallationAdmins(list []string) {
	l := InstallationAdmins(append([]string(nil), list...))
	db.admins.Store(&l)
}

// applyAdmins decides u.IsAdmin by the configured list, when there is one.
func (db *DB) applyAdmins(u *User, emailVerified bool) {
	l := db.admins.Load()
	if l == nil || u.Issuer == LocalIssuer {
		return
	}
	u.IsAdmin = l.Names(u.Subject, u.Email, emailVerified)
}
