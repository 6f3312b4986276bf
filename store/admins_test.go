package store_test

import (
	"context"
	"testing"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

// TestInstallationAdminsListIsTheTruthWhenUsersLoad: once the list is set,
// a user loaded by id is an installation admin only when it names them (by
// subject, or by an email the provider verified), whatever flag their last
// sign-in stored; the local administrator stays one.
func TestInstallationAdminsListIsTheTruthWhenUsersLoad(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := context.Background()
	bySubject, err := db.UpsertSignIn(ctx, "https://idp.example", "ops-1", "", "Ops", true)
	if err != nil {
		t.Fatal(err)
	}
	verified, err := db.SignInOIDC(ctx, store.OIDCSignIn{Issuer: "https://idp.example", Subject: "ada", Email: "Ada@Example.com", EmailVerified: true, IsAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	unverified, err := db.SignInOIDC(ctx, store.OIDCSignIn{Issuer: "https://idp.example", Subject: "eve", Email: "eve@example.com", IsAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	local, err := db.UpsertSignIn(ctx, store.LocalIssuer, "admin", "", "Local administrator", true)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[*store.User]bool) {
		t.Helper()
		for u, admin := range want {
			got, err := db.UserByID(ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.IsAdmin != admin {
				t.Errorf("%s: %s is an installation admin: %v, want %v", when, u.Subject, got.IsAdmin, admin)
			}
		}
	}
	check("before a list is set (the stored flags)", map[*store.User]bool{bySubject: true, verified: true, unverified: true, local: true})
	db.SetInstallationAdmins([]string{"ops-1", " ada@example.com ", "eve@example.com"})
	check("listed", map[*store.User]bool{bySubject: true, verified: true, unverified: false, local: true})
	db.SetInstallationAdmins(nil)
	check("with an empty list", map[*store.User]bool{bySubject: false, verified: false, unverified: false, local: true})
}
