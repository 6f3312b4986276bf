package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Installation settings of an S3 backup target besides backup_target (its
// s3:// URL): how to reach it (plain) and its credentials (sealed).
const (
	backupTargetS3Key    = "backup_target_s3"
	backupTargetCredsKey = "backup-target-credentials"
)

// S3Settings is how to reach an S3 backup target: nothing secret.
type S3Settings struct {
	Endpoint  string `json:"endpoint"`
	Region    string `json:"region"`
	PathStyle bool   `json:"path_style"`
}

// S3Credentials are an S3 backup target's key pair: sealed with the value
// keyring at rest, never shown, logged or audited.
type S3Credentials struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// S3BackupTarget returns the installation's S3 target settings and its
// credentials (opened with the keyring); ok is false when the target is
// not an S3 one (or was saved without them).
func (v *Vault) S3BackupTarget(ctx context.Context) (settings S3Settings, creds S3Credentials, ok bool, err error) {
	var raw string
	err = v.db.Pool.QueryRow(ctx, `SELECT value FROM installation_settings WHERE key = $1`, backupTargetS3Key).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return settings, creds, false, nil
	}
	if err != nil {
		return settings, creds, false, fmt.Errorf("store: S3 backup target: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &settings); err != nil {
		return settings, creds, false, fmt.Errorf("store: S3 backup target: malformed settings")
	}
	plain, err := v.readSecret(ctx, backupTargetCredsKey)
	if err != nil || plain == nil {
		return settings, creds, false, err
	}
	defer clear(plain)
	if err := json.Unmarshal(plain, &creds); err != nil {
		return settings, creds, false, fmt.Errorf("store: S3 backup target: malformed credentials")
	}
	return settings, creds, true, nil
}

// SetS3BackupTarget stores an S3 backup target: its URL, how to reach it
// and its credentials, sealed under the active key (share-locked, as a
// value is, so a rotation switching keys waits for it and seals them
// again), with the audit record, in one transaction. The record names the
// URL, endpoint, region and addressing, never a key.
func (v *Vault) SetS3BackupTarget(ctx context.Context, a Actor, target string, settings S3Settings, creds S3Credentials) error {
	rawSettings, err := json.Marshal(settings)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(creds)
	if err != nil {
		return err
	}
	defer clear(plain)
	err = v.db.InTx(ctx, func(tx pgx.Tx) error {
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		nonce, ct, err := v.keys.seal(keyID, 0, backupTargetCredsKey, 1, plain)
		if err != nil {
			return err
		}
		now := v.db.Now()
		for k, val := range map[string]string{backupTargetKey: target, backupTargetS3Key: string(rawSettings),
			sealedPrefix + backupTargetCredsKey: encodeSealed(keyID, nonce, ct)} {
			if _, err := tx.Exec(ctx, `
				INSERT INTO installation_settings (key, value, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`, k, val, now); err != nil {
				return err
			}
		}
		e := a.event("backup.target-set")
		e.Target = target
		e.Detail = map[string]any{"endpoint": settings.Endpoint, "region": settings.Region, "path_style": settings.PathStyle}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("store: set backup target: %w", err)
	}
	return nil
}

// forgetS3Target deletes an S3 target's settings and credentials, when a
// directory target replaces it.
func forgetS3Target(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `DELETE FROM installation_settings WHERE key IN ($1, $2)`, backupTargetS3Key, sealedPrefix+backupTargetCredsKey)
	return err
}
