package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// ParseRole returns the role named s, or an Invalid error.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleViewer, RoleDeployer, RoleAdmin:
		return r, nil
	}
	return RoleNone, Errorf(Invalid, "Choose a role: admin, deployer or viewer.")
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
