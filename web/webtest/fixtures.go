package webtest

import (
	"context"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// MinimalManifest is a valid skali.yaml with one required value (APP_DOMAIN);
// replace "hello-world" to name the project otherwise.
const MinimalManifest = `name: hello-world

applications:
  web:
    build:
      context: .
    ports:
      http:
        port: 8080
    routes:
      public:
        domain: "${APP_DOMAIN}"
        port: http
`

// CreateEnvironment stores a project compiled from manifest (MinimalManifest
// when empty) unless it exists, and an environment named env in it, straight
// through the store (no HTTP). It returns the environment.
func (s *Server) CreateEnvironment(tb testing.TB, manifest, env string) *store.Environment {
	tb.Helper()
	ctx := context.Background()
	if manifest == "" {
		manifest = MinimalManifest
	}
	res := compiler.Compile([]byte(manifest))
	if !res.Valid() {
		tb.Fatalf("fixture manifest is invalid: %v", res.Errors())
	}
	def := res.Definition
	p, err := s.DB.ProjectByName(ctx, def.Name)
	if apperr.CodeOf(err) == apperr.NotFound {
		p, _, err = s.DB.CreateProject(ctx, store.Actor{}, store.NewRevision{
			Name: def.Name, Description: def.Description, Source: manifest,
			Canonical: def.Canonical(), Hash: res.Hash, Summary: compiler.Summarize(nil, def),
		})
	}
	if err != nil {
		tb.Fatalf("fixture project: %v", err)
	}
	e, err := s.DB.CreateEnvironment(ctx, store.Actor{}, p.ID, env)
	if err != nil {
		tb.Fatalf("fixture environment %s/%s: %v", p.Name, env, err)
	}
	return e
}

// AddMember gives the person with email the role on the environment,
// straight through the store. The person need not have signed in yet: they
// become a pending user that SignInAs with the same email then claims.
func (s *Server) AddMember(tb testing.TB, env *store.Environment, email string, role store.Role) {
	tb.Helper()
	if _, err := s.DB.AddMember(context.Background(), store.Actor{}, env, email, role); err != nil {
		tb.Fatalf("add %s as %s of %s/%s: %v", email, role, env.Project, env.Name, err)
	}
}

// UserID returns the id of the user with the email (the one who signed in
// most recently when there are several).
func (s *Server) UserID(tb testing.TB, email string) int64 {
	tb.Helper()
	var id int64
	err := s.DB.Pool.QueryRow(context.Background(),
		`SELECT id FROM users WHERE lower(email) = lower($1) ORDER BY last_sign_in_at DESC NULLS LAST, id LIMIT 1`, email).Scan(&id)
	if err != nil {
		tb.Fatalf("user %s: %v", email, err)
	}
	return id
}

// ActivateRevision makes revision number of the project the one active in
// its environment env, as a finished deploy does, straight in the database.
func (s *Server) ActivateRevision(tb testing.TB, project, env string, number int) {
	tb.Helper()
	tag, err := s.DB.Pool.Exec(context.Background(), `
		UPDATE environments e SET active_revision_id = r.id
		FROM projects p, revisions r
		WHERE p.id = e.project_id AND r.project_id = p.id AND p.name = $1 AND e.name = $2 AND r.number = $3`, project, env, number)
	if err != nil || tag.RowsAffected() != 1 {
		tb.Fatalf("activate revision %d in %s/%s: %v", number, project, env, err)
	}
}
