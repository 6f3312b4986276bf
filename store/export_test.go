package store

import "context"

// SealForTest and OpenForTest expose the keyring's sealing to the tamper tests of the
// external test package only (this file is compiled into tests alone).
func (k *Keyring) SealForTest(id string, envID int64, name string, version int, plaintext []byte) (nonce, ciphertext []byte, err error) {
	return k.seal(id, envID, name, version, plaintext)
}

// OpenForTest opens a sealed slot.
func (k *Keyring) OpenForTest(id string, envID int64, name string, version int, nonce, ciphertext []byte) ([]byte, error) {
	return k.open(id, envID, name, version, nonce, ciphertext)
}

// MigrateWith applies the given migrations instead of the embedded ones.
func (db *DB) MigrateWith(ctx context.Context, all []Migration) ([]string, error) {
	return db.migrate(ctx, all)
}
