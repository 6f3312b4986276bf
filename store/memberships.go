package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/skali-dev/studio/apperr"
)

// Role is what a user may do on one environment.
type Role string

// The roles of an environment, from least to most.
const (
	RoleNone     Role = ""
	RoleViewer   Role = "viewer"
	RoleDeployer Role = "deployer"
	RoleAdmin    Role = "admin"
)

// rank orders roles so that a higher role includes every lower one.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleDeployer:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Includes reports whether r grants at least what want grants.
func (r Role) Includes(want Role) bool { return r.rank() >= want.rank() }

// ParseRole returns the role named s, or an apperr.Invalid error.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleViewer, RoleDeployer, RoleAdmin:
		return r, nil
	}
	return RoleNone, apperr.Errorf(apperr.Invalid, "Choose a role: admin, deployer or viewer.")
}

// EnvironmentRole returns the user's role on the environment: RoleAdmin for
// installation admins, the membership's role otherwise, RoleNone without one.
func (db *DB) EnvironmentRole(ctx context.Context, u *User, environmentID int64) (Role, error) {
	if u == nil {
		return RoleNone, nil
	}
	if u.IsAdmin {
		return RoleAdmin, nil
	}
	var role string
	err := db.Pool.QueryRow(ctx, `SELECT role FROM memberships WHERE environment_id = $1 AND user_id = $2`, environmentID, u.ID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return RoleNone, nil
	}
	if err != nil {
		return RoleNone, fmt.Errorf("store: environment role: %w", err)
	}
	return Role(role), nil
}

// Member is a user's role on one environment.
type Member struct {
	UserID int64
	Email  string
	Name   string
	// Subject identifies the member at their identity provider.
	Subject string
	Role    Role
	// Pending is true for someone added by email who has not signed in yet.
	Pending    bool
	LastSignIn *time.Time
	AddedAt    time.Time
}

// DisplayName is the member's name, else their email, else their subject
// (the same rule as User.DisplayName).
func (m Member) DisplayName() string { return displayName(m.Name, m.Email, m.Subject) }

// Members lists the members of the environment: admins first, then by name.
func (db *DB) Members(ctx context.Context, environmentID int64) ([]Member, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT u.id, u.email, u.name, u.subject, m.role, u.issuer = '', u.last_sign_in_at, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.environment_id = $1
		ORDER BY CASE m.role WHEN 'admin' THEN 0 WHEN 'deployer' THEN 1 ELSE 2 END, lower(coalesce(nullif(u.name, ''), u.email))`,
		environmentID)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Member, error) {
		var m Member
		err := row.Scan(&m.UserID, &m.Email, &m.Name, &m.Subject, &m.Role, &m.Pending, &m.LastSignIn, &m.AddedAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	return out, nil
}

// emailPattern is a plausibility check, not a validator: one @, something on
// both sides, a dot in the domain, no spaces.
var emailPattern = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)

// ValidEmail reports whether s looks like an email address: valid UTF-8
// with no control characters.
func ValidEmail(s string) bool {
	return len(s) <= 254 && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) && emailPattern.MatchString(s)
}

// AddMember gives the person with this email the role on the environment,
// with its audit record, in one transaction. When nobody with that email has
// signed in yet, a pending user is created for it; their first sign-in with
// that verified email claims it (see SignInOIDC).
func (db *DB) AddMember(ctx context.Context, a Actor, env *Environment, email string, role Role) (*Member, error) {
	email = strings.TrimSpace(email)
	if !ValidEmail(email) {
		return nil, apperr.Errorf(apperr.Invalid, "Enter an email address, like ada@example.com.")
	}
	if _, err := ParseRole(string(role)); err != nil {
		return nil, err
	}
	var m *Member
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var id int64
		var pending bool
		// Someone who signed in with this email, verified by their
		// provider, the most recent first; else the pending user of this
		// email; else a new pending user. An unverified email could be
		// anybody's, so it never receives the role.
		err := tx.QueryRow(ctx, `
			SELECT id, issuer = '' FROM users
			WHERE lower(email) = lower($1) AND issuer <> $2 AND (issuer = '' OR email_verified)
			ORDER BY issuer = '', last_sign_in_at DESC NULLS LAST, id
			LIMIT 1`, email, LocalIssuer).Scan(&id, &pending)
		if errors.Is(err, pgx.ErrNoRows) {
			pending = true
			err = tx.QueryRow(ctx, `
				INSERT INTO users (issuer, subject, email) VALUES ('', 'pending:' || lower($1), $1)
				RETURNING id`, email).Scan(&id)
		}
		if err != nil {
			return err
		}
		var existing string
		err = tx.QueryRow(ctx, `SELECT role FROM memberships WHERE environment_id = $1 AND user_id = $2`, env.ID, id).Scan(&existing)
		if err == nil {
			return apperr.Errorf(apperr.Conflict, "%s is already a member of %s/%s (%s). Change their role in the list instead.", email, env.Project, env.Name, existing)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memberships (environment_id, user_id, role) VALUES ($1, $2, $3)`, env.ID, id, string(role)); err != nil {
			return err
		}
		if m, err = memberTx(ctx, tx, env.ID, id); err != nil {
			return err
		}
		e := a.event("member.added")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, m.Email
		e.Detail = map[string]any{"role": string(role), "pending": pending}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: add member: %w", err)
	}
	return m, nil
}

func memberTx(ctx context.Context, tx pgx.Tx, environmentID, userID int64) (*Member, error) {
	var m Member
	err := tx.QueryRow(ctx, `
		SELECT u.id, u.email, u.name, u.subject, m.role, u.issuer = '', u.last_sign_in_at, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.environment_id = $1 AND m.user_id = $2`, environmentID, userID).
		Scan(&m.UserID, &m.Email, &m.Name, &m.Subject, &m.Role, &m.Pending, &m.LastSignIn, &m.AddedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "That person is not a member of this environment.")
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// ChangeMemberRole sets the member's role on the environment, with its audit
// record. Setting the role a member already has changes nothing and records
// nothing.
func (db *DB) ChangeMemberRole(ctx context.Context, a Actor, env *Environment, userID int64, role Role) (*Member, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return nil, err
	}
	var m *Member
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if m, err = memberTx(ctx, tx, env.ID, userID); err != nil {
			return err
		}
		from := m.Role
		if from == role {
			return nil
		}
		if err := keepAnAdmin(ctx, tx, a, env, m); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memberships SET role = $3, updated_at = now() WHERE environment_id = $1 AND user_id = $2`,
			env.ID, userID, string(role)); err != nil {
			return err
		}
		m.Role = role
		if err := voidApprovalsOfTx(ctx, tx, env.ID, userID); err != nil {
			return err
		}
		e := a.event("member.changed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, m.Email
		e.Detail = map[string]any{"from": string(from), "to": string(role)}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: change member role: %w", err)
	}
	return m, nil
}

// keepAnAdmin refuses to take the admin role from m when m is the
// environment's last admin and the actor is not an installation admin:
// nobody among its members could then manage the environment. Installation
// admins may, since they manage every environment anyway. The environment
// row is locked so that two admins demoting each other at once cannot both
// succeed.
func keepAnAdmin(ctx context.Context, tx pgx.Tx, a Actor, env *Environment, m *Member) error {
	if m.Role != RoleAdmin || (a.User != nil && a.User.IsAdmin) {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM environments WHERE id = $1 FOR UPDATE`, env.ID); err != nil {
		return err
	}
	var others int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE environment_id = $1 AND role = 'admin' AND user_id <> $2`,
		env.ID, m.UserID).Scan(&others); err != nil {
		return err
	}
	if others == 0 {
		return apperr.Errorf(apperr.Conflict, "%s is the last admin of %s/%s. Make someone else an admin first.", m.DisplayName(), env.Project, env.Name)
	}
	return nil
}

// RemoveMember takes the member's role on the environment away, with its
// audit record.
func (db *DB) RemoveMember(ctx context.Context, a Actor, env *Environment, userID int64) (*Member, error) {
	var m *Member
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		if m, err = memberTx(ctx, tx, env.ID, userID); err != nil {
			return err
		}
		if err := keepAnAdmin(ctx, tx, a, env, m); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memberships WHERE environment_id = $1 AND user_id = $2`, env.ID, userID); err != nil {
			return err
		}
		if err := voidApprovalsOfTx(ctx, tx, env.ID, userID); err != nil {
			return err
		}
		e := a.event("member.removed")
		e.Project, e.Environment, e.EnvironmentID, e.Target = env.Project, env.Name, &env.ID, m.Email
		e.Detail = map[string]any{"role": string(m.Role)}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: remove member: %w", err)
	}
	return m, nil
}

// AdminEnvironments lists the environments whose audit log and members u may
// manage: every environment for installation admins, the ones u is an admin
// of otherwise; by project and name, the first limit of them (0: all).
func (db *DB) AdminEnvironments(ctx context.Context, u *User, limit int) ([]Environment, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, _ := db.Pool.Query(ctx, `
		SELECT `+environmentColumns+` FROM environments e JOIN projects p ON p.id = e.project_id
		WHERE $2 OR EXISTS (SELECT 1 FROM memberships m WHERE m.environment_id = e.id AND m.user_id = $1 AND m.role = 'admin')
		ORDER BY p.name, e.name LIMIT $3`, u.ID, u.IsAdmin, lim)
	out, err := pgx.CollectRows(rows, collectEnvironment)
	if err != nil {
		return nil, fmt.Errorf("store: admin environments: %w", err)
	}
	return out, nil
}

// AdministersAnyEnvironment reports whether u may see the audit log: an
// installation admin, or an admin of at least one environment.
func (db *DB) AdministersAnyEnvironment(ctx context.Context, u *User) (bool, error) {
	if u.IsAdmin {
		return true, nil
	}
	var ok bool
	err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE user_id = $1 AND role = 'admin')`, u.ID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("store: administers any environment: %w", err)
	}
	return ok, nil
}
