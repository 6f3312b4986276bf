package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/handlers"
	"github.com/skali-dev/studio/store"
)

// An event stream followed with an API token (issue 27: `studio deploy
// --wait`, `studio runs watch`) instead of a session: the handshake carries
// Authorization: Bearer, the token's owner is the viewer and the token's
// scope caps their role, exactly as on the JSON API. The stream's access
// re-checks ask whether the token is still valid and still reaches the
// environment, in place of the session.

// streamTokenPrefix marks a stream viewer's key as an API token's id
// rather than a session token.
const streamTokenPrefix = "apitoken:"

// bearerStreams authenticates an event stream handshake that carries
// Authorization (by authenticate, the JSON API's token check, which
// answers 401 itself for a bad token); one without it goes on to the
// session check.
func bearerStreams(authenticate func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		withToken := authenticate(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				next.ServeHTTP(w, r)
				return
			}
			// The token is checked before the handler runs: the stream's
			// access answer dates from here (see streams.serve).
			ctx := context.WithValue(r.Context(), tokenCheckedKey{}, time.Now())
			withToken.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// tokenCheckedKey holds, in a token-authenticated handshake's context, when
// the token's check began.
type tokenCheckedKey struct{}

// accessCheckedAt is when the handshake's access checks began: for a token,
// when the middleware started checking it; otherwise now (the session and
// role are read after).
func accessCheckedAt(r *http.Request) time.Time {
	if t, ok := r.Context().Value(tokenCheckedKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// tokenViewer is the viewer of a stream whose handshake was authenticated
// with an API token, or nil.
func tokenViewer(r *http.Request) *viewer {
	t, u := handlers.CurrentToken(r.Context()), handlers.CurrentUser(r.Context())
	if t == nil || u == nil {
		return nil
	}
	return &viewer{user: u, token: streamTokenPrefix + strconv.FormatInt(t.ID, 10), signedInAt: time.Now()}
}

// checkTokenAccess is checkAccess for a stream followed with an API token:
// the token is neither revoked nor expired, and its owner's role on the
// environment, capped by the token's scope, is viewer at least. It reports
// handled false for a session's key.
func (s *streams) checkTokenAccess(ctx context.Context, k accessKey) (ok, handled bool, err error) {
	idText, isToken := strings.CutPrefix(k.token, streamTokenPrefix)
	if !isToken {
		return false, false, nil
	}
	id, _ := strconv.ParseInt(idText, 10, 64)
	db := s.a.deps.DB
	t, err := db.TokenByID(ctx, id)
	if apperr.CodeOf(err) == apperr.NotFound {
		return false, true, nil
	}
	if err != nil {
		return false, true, err
	}
	if t.RevokedAt != nil || t.Expired(db.Now()) || t.UserID != k.userID {
		return false, true, nil
	}
	u, err := db.UserByID(ctx, k.userID)
	if apperr.CodeOf(err) == apperr.NotFound {
		return false, true, nil
	}
	if err != nil {
		return false, true, err
	}
	role, err := db.EnvironmentRole(ctx, u, k.envID)
	if err != nil {
		return false, true, err
	}
	return store.MinRole(role, t.RoleOn(k.envID)).Includes(store.RoleViewer), true, nil
}
