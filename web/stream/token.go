package stream

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

// Bearer authenticates an event stream handshake that carries
// Authorization (by authenticate, the JSON API's token check, which
// answers 401 itself for a bad token and puts the token and its owner in
// the context); one without it goes on to the session check.
func Bearer(authenticate func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		withToken := authenticate(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				next.ServeHTTP(w, r)
				return
			}
			// The token is checked before the handler runs: the stream's
			// access answer dates from here (see Server.serve).
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

// tokenOf reads the API token of a stream followed with one (isToken
// false for a session's key; a nil token when it is gone).
func (s *Server) tokenOf(ctx context.Context, k accessKey) (t *store.Token, isToken bool, err error) {
	idText, isToken := strings.CutPrefix(k.token, streamTokenPrefix)
	if !isToken {
		return nil, false, nil
	}
	id, _ := strconv.ParseInt(idText, 10, 64)
	t, err = s.base.DB.TokenByID(ctx, id)
	if apperr.CodeOf(err) == apperr.NotFound {
		return nil, true, nil
	}
	return t, true, err
}
