package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
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
	keyID, err := v.db.ActiveKeyID(ctx)
	if err != nil || keyID == "" {
		ids := v.keys.IDs()
		if len(ids) == 0 {
			return nil, fmt.Errorf("store: installation secret %s: no value-encryption key", key)
		}
		keyID = ids[0]
	}
	nonce, ct, err := v.keys.seal(keyID, 0, key, 1, plain)
	if err != nil {
		return nil, err
	}
	enc := keyID + ":" + base64.StdEncoding.EncodeToString(nonce) + ":" + base64.StdEncoding.EncodeToString(ct)
	if _, err := v.db.Pool.Exec(ctx, `INSERT INTO installation_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, "sealed:"+key, enc); err != nil {
		return nil, fmt.Errorf("store: store installation secret %s: %w", key, err)
	}
	return v.readSecret(ctx, key)
}

func (v *Vault) readSecret(ctx context.Context, key string) ([]byte, error) {
	rows, _ := v.db.Pool.Query(ctx, `SELECT value FROM installation_settings WHERE key = $1`, "sealed:"+key)
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
	parts := strings.Split(enc, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("store: installation secret %s is malformed", key)
	}
	nonce, err1 := base64.StdEncoding.DecodeString(parts[1])
	ct, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("store: installation secret %s is malformed", key)
	}
	return v.keys.open(parts[0], 0, key, 1, nonce, ct)
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
