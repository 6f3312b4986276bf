package webtest

import (
	"context"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web"
)

// WithValueKeys gives the Studio a value-encryption keyring holding one
// fresh random key, so tests can set and import values.
func WithValueKeys() Option {
	return func(d *web.Deps) {
		keys, err := store.OpenKeyring(context.Background(), d.DB, store.KeyringOptions{SecretKey: store.GenerateKey()})
		if err != nil {
			panic("webtest: value keys: " + err.Error())
		}
		d.Vault = store.NewVault(d.DB, keys)
	}
}
