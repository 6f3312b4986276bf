package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// InstallationSecret returns the installation-wide secret stored under key
// in installation_settings, generating and storing it at first use. It is
// sealed with the value keyring (environment 0, the key as its name), so a
// database dump alone does not reveal it. Two processes starting at once
// store one secret: the first insert wins and both read it back.
func (v *Vault) InstallationSecret(ctx context.Context, key string, generate func() ([]byte, error)) ([]byte, error) {
	if s, err := v.readSecret(ctx, key); err != nil || s != nil {
		return s, err
	}
	plain, err := generate()
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	// Sealed and stored under a share lock of the active key, as a value
	// is: a rotation switching keys waits for it, and finds it when it
	// seals the installation's secrets again.
	err = v.db.InTx(ctx, func(tx pgx.Tx) error {
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		nonce, ct, err := v.keys.seal(keyID, 0, key, 1, plain)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO installation_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
			sealedPrefix+key, encodeSealed(keyID, nonce, ct))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: store installation secret %s: %w", key, err)
	}
	return v.readSecret(ctx, key)
}

func (v *Vault) readSecret(ctx context.Context, key string) ([]byte, error) {
	rows, _ := v.db.Pool.Query(ctx, `SELECT value FROM installation_settings WHERE key = $1`, sealedPrefix+key)
	var enc string
	found := false
	for rows.Next() {
		found = true
		if err := rows.Scan(&enc); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: installation secret %s: %w", key, err)
	}
	if !found {
		return nil, nil
	}
	keyID, nonce, ct, err := decodeSealed(key, enc)
	if err != nil {
		return nil, err
	}
	return v.keys.open(keyID, 0, key, 1, nonce, ct)
}

// sealedPrefix marks the installation settings that hold a sealed secret.
const sealedPrefix = "sealed:"

// An installation secret is stored as "<key id>:<nonce>:<ciphertext>", the
// last two in base64.
func encodeSealed(keyID string, nonce, ct []byte) string {
	return keyID + ":" + base64.StdEncoding.EncodeToString(nonce) + ":" + base64.StdEncoding.EncodeToString(ct)
}

func decodeSealed(key, enc string) (keyID string, nonce, ct []byte, err error) {
	parts := strings.Split(enc, ":")
	if len(parts) != 3 {
		return "", nil, nil, fmt.Errorf("store: installation secret %s is malformed", key)
	}
	nonce, err1 := base64.StdEncoding.DecodeString(parts[1])
	ct, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil {
		return "", nil, nil, fmt.Errorf("store: installation secret %s is malformed", key)
	}
	return parts[0], nonce, ct, nil
}

// resealInstallationSecrets seals again under newID every installation
// secret sealed with another key, each in a short transaction of its own
// (a key rotation's part for them), and returns how many it sealed again.
func (v *Vault) resealInstallationSecrets(ctx context.Context, newID string) (int, error) {
	rows, _ := v.db.Pool.Query(ctx, `SELECT key FROM installation_settings
		WHERE starts_with(key, $2) AND split_part(value, ':', 1) <> $1 ORDER BY key`, newID, sealedPrefix)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		name := strings.TrimPrefix(k, sealedPrefix)
		sealed := false
		err := v.db.InTx(ctx, func(tx pgx.Tx) error {
			sealed = false
			var enc string
			if err := tx.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = $1 FOR UPDATE`, k).Scan(&enc); err != nil {
				return err
			}
			keyID, nonce, ct, err := decodeSealed(name, enc)
			if err != nil || keyID == newID {
				return err
			}
			pt, err := v.keys.open(keyID, 0, name, 1, nonce, ct)
			if err != nil {
				return fmt.Errorf("installation secret %s: %w", name, err)
			}
			nonce, ct, err = v.keys.seal(newID, 0, name, 1, pt)
			clear(pt)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE installation_settings SET value = $2 WHERE key = $1`, k, encodeSealed(newID, nonce, ct))
			sealed = err == nil
			return err
		})
		if err != nil {
			return n, err
		}
		if sealed {
			n++
		}
	}
	return n, nil
}

// InstallationSetting returns a plain (not secret) installation setting,
// storing the result of generate at first use.
func (db *DB) InstallationSetting(ctx context.Context, key string, generate func() (string, error)) (string, error) {
	var val string
	err := db.Pool.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = $1`, key).Scan(&val)
	if err == nil {
		return val, nil
	}
	g, err := generate()
	if err != nil {
		return "", err
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO installation_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, g); err != nil {
		return "", fmt.Errorf("store: installation setting %s: %w", key, err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = $1`, key).Scan(&val); err != nil {
		return "", fmt.Errorf("store: installation setting %s: %w", key, err)
	}
	return val, nil
}
