package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
)

// TokenPrefix starts every API token's secret, so that a leaked token is
// recognisable (by a person, and by secret scanners).
const TokenPrefix = "skst_"

// Limits of a token's lifetime in days.
const (
	DefaultTokenDays = 90
	MaxTokenDays     = 365
)

// TokenGrant is one environment a token may act on and the most it may do
// there.
type TokenGrant struct {
	EnvironmentID int64
	Project       string
	Environment   string
	Role          Role
}

// Token is an API token as listed: never its secret, which is not stored.
type Token struct {
	ID        int64
	UserID    int64
	Owner     string
	Name      string
	Scope     []TokenGrant
	CreatedAt time.Time
	ExpiresAt time.Time
	// LastUsedAt is nil for a token never used; it is updated at most once
	// a minute.
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	RevokedBy  string
}

// Expired reports whether the token is past its expiry at now.
func (t *Token) Expired(now time.Time) bool { return !now.Before(t.ExpiresAt) }

// Usable fails with Unauthorized, saying why, when the token is revoked or
// past its expiry at now: a request may not act with it.
func (t *Token) Usable(now time.Time) error {
	if t.RevokedAt != nil {
		return apperr.Errorf(apperr.Unauthorized, "The token %s was revoked on %s. Create a new one on the Tokens page.", t.Name, humanize.Date(*t.RevokedAt))
	}
	if t.Expired(now) {
		return apperr.Errorf(apperr.Unauthorized, "The token %s expired on %s. Create a new one on the Tokens page.", t.Name, humanize.Date(t.ExpiresAt))
	}
	return nil
}

// RoleOn returns the role the token's scope grants on the environment
// (RoleNone outside its scope); the owner's own role still caps it.
func (t *Token) RoleOn(environmentID int64) Role {
	for _, g := range t.Scope {
		if g.EnvironmentID == environmentID {
			return g.Role
		}
	}
	return RoleNone
}

// NewToken is what creating a token needs.
type NewToken struct {
	Name  string
	Scope []TokenGrant
	Days  int
}

// TokenNameProblem says what is wrong with a token name, or "".
func TokenNameProblem(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "Give the token a name, such as ci-deploy."
	case len(name) > 100:
		return "This name has " + humanize.TooLong(len(name), 100) + "."
	}
	return ""
}

func tokenHash(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// CreateToken stores a new token of a's user and returns it with its secret,
// which is never stored: only its SHA-256 is. The caller checks that every
// grant's role is within the user's own.
func (db *DB) CreateToken(ctx context.Context, a Actor, nt NewToken) (*Token, string, error) {
	if a.User == nil {
		return nil, "", apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	if p := TokenNameProblem(nt.Name); p != "" {
		return nil, "", apperr.Errorf(apperr.Invalid, "%s", p)
	}
	if nt.Days < 1 || nt.Days > MaxTokenDays {
		return nil, "", apperr.Errorf(apperr.Invalid, "A token expires after 1 to %d days.", MaxTokenDays)
	}
	if len(nt.Scope) == 0 {
		return nil, "", apperr.Errorf(apperr.Invalid, "Choose at least one environment the token may act on.")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, "", fmt.Errorf("store: token secret: %w", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	var id int64
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO api_tokens (user_id, name, secret_sha256, expires_at)
			VALUES ($1, $2, $3, $4) RETURNING id`,
			a.User.ID, strings.TrimSpace(nt.Name), tokenHash(secret), db.Now().Add(time.Duration(nt.Days)*24*time.Hour)).Scan(&id); err != nil {
			return err
		}
		var scope []string
		for _, g := range nt.Scope {
			if _, err := tx.Exec(ctx, `INSERT INTO api_token_scopes (token_id, environment_id, role) VALUES ($1, $2, $3)`,
				id, g.EnvironmentID, string(g.Role)); err != nil {
				return err
			}
			scope = append(scope, g.Project+"/"+g.Environment+":"+string(g.Role))
		}
		e := a.event("token.created")
		e.Target = strings.TrimSpace(nt.Name)
		e.Detail = map[string]any{"scope": scope, "days": nt.Days}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: create token: %w", err)
	}
	t, err := db.TokenByID(ctx, id)
	if err != nil {
		return nil, "", err
	}
	return t, secret, nil
}

const tokenColumns = `t.id, t.user_id, ` + `COALESCE(NULLIF(u.name, ''), NULLIF(u.email, ''), u.subject)` + `, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, COALESCE(t.revoked_by, '')`

func scanToken(row pgx.Row) (*Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.UserID, &t.Owner, &t.Name, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt, &t.RevokedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apperr.Errorf(apperr.NotFound, "No such token.")
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// loadScopes fills the scope of each token.
func (db *DB) loadScopes(ctx context.Context, tokens []*Token) error {
	if len(tokens) == 0 {
		return nil
	}
	ids := make([]int64, len(tokens))
	byID := map[int64]*Token{}
	for i, t := range tokens {
		ids[i] = t.ID
		byID[t.ID] = t
		t.Scope = nil
	}
	rows, err := db.Pool.Query(ctx, `
		SELECT s.token_id, s.environment_id, p.name, e.name, s.role
		FROM api_token_scopes s
		JOIN environments e ON e.id = s.environment_id
		JOIN projects p ON p.id = e.project_id
		WHERE s.token_id = ANY($1)
		ORDER BY p.name, e.name`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var g TokenGrant
		var role string
		if err := rows.Scan(&id, &g.EnvironmentID, &g.Project, &g.Environment, &role); err != nil {
			return err
		}
		g.Role = Role(role)
		byID[id].Scope = append(byID[id].Scope, g)
	}
	return rows.Err()
}

// TokenByID returns one token with its scope.
func (db *DB) TokenByID(ctx context.Context, id int64) (*Token, error) {
	t, err := scanToken(db.Pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = $1`, id))
	if err != nil {
		if apperr.CodeOf(err) == apperr.NotFound {
			return nil, err
		}
		return nil, fmt.Errorf("store: token: %w", err)
	}
	if err := db.loadScopes(ctx, []*Token{t}); err != nil {
		return nil, fmt.Errorf("store: token scope: %w", err)
	}
	return t, nil
}

// Tokens lists tokens, newest first: every token when all is true (for
// installation admins), else only those of userID.
func (db *DB) Tokens(ctx context.Context, userID int64, all bool) ([]*Token, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE $2 OR t.user_id = $1 ORDER BY t.revoked_at IS NOT NULL, t.created_at DESC, t.id DESC`, userID, all)
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Token, error) { return scanToken(row) })
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	if err := db.loadScopes(ctx, list); err != nil {
		return nil, fmt.Errorf("store: token scopes: %w", err)
	}
	return list, nil
}

// AuthenticateToken returns the token whose secret is given, with its
// scope. An unknown, revoked or expired token is Unauthorized, with a
// sentence that says which (an unknown secret says nothing more).
func (db *DB) AuthenticateToken(ctx context.Context, secret string) (*Token, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return nil, apperr.Errorf(apperr.Unauthorized, "This is not a Studio API token. Create one on the Tokens page.")
	}
	t, err := scanToken(db.Pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.secret_sha256 = $1`,
		tokenHash(secret)))
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, apperr.Errorf(apperr.Unauthorized, "This token is not known to this Studio. Create one on the Tokens page.")
	}
	if err != nil {
		return nil, fmt.Errorf("store: authenticate token: %w", err)
	}
	if err := t.Usable(db.Now()); err != nil {
		return nil, err
	}
	if err := db.loadScopes(ctx, []*Token{t}); err != nil {
		return nil, fmt.Errorf("store: token scope: %w", err)
	}
	return t, nil
}

// TouchToken records that the token was used now, at most once a minute,
// so that reads through the API do not write on every request.
func (db *DB) TouchToken(ctx context.Context, id int64) error {
	_, err := db.Pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = now()
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, id)
	if err != nil {
		return fmt.Errorf("store: touch token: %w", err)
	}
	return nil
}

// RevokeToken revokes a token of a's user, or any token when a's user is an
// installation admin, with its audit record. Revoking a revoked token
// changes nothing.
func (db *DB) RevokeToken(ctx context.Context, a Actor, id int64) (*Token, error) {
	if a.User == nil {
		return nil, apperr.Errorf(apperr.Unauthorized, "Sign in first.")
	}
	t, err := db.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.UserID != a.User.ID && !a.User.IsAdmin {
		return nil, apperr.Errorf(apperr.NotFound, "No such token.")
	}
	if t.RevokedAt != nil {
		return t, nil
	}
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE api_tokens SET revoked_at = now(), revoked_by = $2 WHERE id = $1 AND revoked_at IS NULL`,
			id, a.User.DisplayName()); err != nil {
			return err
		}
		e := a.event("token.revoked")
		e.Target = t.Name
		e.Detail = map[string]any{"owner": t.Owner}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: revoke token: %w", err)
	}
	return db.TokenByID(ctx, id)
}

// MinRole returns the lesser of two roles: what a token may do is the
// least of its scope and its owner's current role.
func MinRole(a, b Role) Role {
	if a.rank() <= b.rank() {
		return a
	}
	return b
}

// GrantableEnvironments lists every environment u holds a role on, with
// that role (admin everywhere for installation admins): what u may put in
// a token's scope.
func (db *DB) GrantableEnvironments(ctx context.Context, u *User) ([]TokenGrant, error) {
	rows, err := db.Pool.Query(ctx, `
		SELECT e.id, p.name, e.name, CASE WHEN $2 THEN 'admin' ELSE m.role END
		FROM environments e
		JOIN projects p ON p.id = e.project_id
		LEFT JOIN memberships m ON m.environment_id = e.id AND m.user_id = $1
		WHERE $2 OR m.role IS NOT NULL
		ORDER BY p.name, e.name`, u.ID, u.IsAdmin)
	if err != nil {
		return nil, fmt.Errorf("store: grantable environments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenGrant, error) {
		var g TokenGrant
		var role string
		err := row.Scan(&g.EnvironmentID, &g.Project, &g.Environment, &role)
		g.Role = Role(role)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: grantable environments: %w", err)
	}
	return out, nil
}

// GrantableEnvironmentsMatching is GrantableEnvironments narrowed to the
// environments whose "project/environment" contains search
// (case-insensitive; "" matches all), at most limit of them, with how many
// match in all: the tokens page lists a few and searches the rest.
func (db *DB) GrantableEnvironmentsMatching(ctx context.Context, u *User, search string, limit int) ([]TokenGrant, int, error) {
	// The environments, their projects' names and (unless an installation
	// admin) u's memberships; args holds what the conditions name.
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	from, role := `environments e JOIN projects p ON p.id = e.project_id`, `'admin'`
	if !u.IsAdmin {
		from, role = from+` JOIN memberships m ON m.environment_id = e.id AND m.user_id = `+arg(u.ID), `m.role`
	}
	where := ``
	if search != "" {
		where = ` WHERE lower(p.name || '/' || e.name) LIKE '%' || lower(` + arg(likeEscape(search)) + `) || '%'`
	}
	// The page and the count are two statements: a window count over the
	// page's query would join and sort every environment before the limit.
	rows, err := db.Pool.Query(ctx, `SELECT e.id, p.name, e.name, `+role+` FROM `+from+where+`
		ORDER BY p.name, e.name LIMIT `+strconv.Itoa(limit), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: grantable environments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenGrant, error) {
		var g TokenGrant
		var r string
		err := row.Scan(&g.EnvironmentID, &g.Project, &g.Environment, &r)
		g.Role = Role(r)
		return g, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: grantable environments: %w", err)
	}
	total := len(out)
	if total == limit {
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+from+where, args...).Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("store: count grantable environments: %w", err)
		}
	}
	return out, total, nil
}
