package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/pgserver"
)

const keysUsage = `usage: studio keys generate | studio keys rotate [flags]

generate   print a fresh random value-encryption key (base64 of 32 bytes)
rotate     re-encrypt every value under a new key while the Studio keeps serving

Where keys live:
  STUDIO_SECRET_KEY  base64 keys separated by commas. The first is the key new
                     values are sealed under on a fresh database and the key
                     'rotate' moves every value to; the others stay readable.
  <data-dir>/secret.key
                     used when STUDIO_SECRET_KEY is empty (generated with mode
                     0600 on first start), one key per line, newest first.

Rotating with the key file (the embedded default):
  studio keys rotate   generates a new key, writes it first into secret.key
                       (the old key stays on the next line), re-encrypts every
                       value and then removes the retired key from the file.
                       A running Studio reads the new key from the file when it
                       first meets it; nothing needs restarting.

Rotating with STUDIO_SECRET_KEY (replicas):
  1. NEW=$(studio keys generate)
  2. give every replica STUDIO_SECRET_KEY="$NEW,$OLD" and restart them one by
     one (they keep serving with the old key active and can read the new one)
  3. STUDIO_SECRET_KEY="$NEW,$OLD" studio keys rotate
  4. set STUDIO_SECRET_KEY="$NEW" everywhere; the old key is retired.
`

// openKeyring loads the value-encryption keys for serve and rotate and
// checks them against the database.
func openKeyring(ctx context.Context, cfg *Config, db *store.DB, logger *slog.Logger) (*store.Keyring, error) {
	if cfg.SecretKey == "" && cfg.DatabaseURL != "" {
		logger.Warn("STUDIO_SECRET_KEY is not set: values are encrypted with the key file of this data directory; "+
			"replicas sharing this database must all use the same key, so set STUDIO_SECRET_KEY on every one",
			"file", keyFilePath(cfg))
	}
	keys, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: cfg.SecretKey, KeyFile: keyFilePath(cfg), Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("value-encryption key: %w", err)
	}
	return keys, nil
}

func keyFilePath(cfg *Config) string {
	return filepath.Join(cfg.DataDir, "secret.key")
}

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return fmt.Errorf("name a keys command: generate or rotate")
	}
	switch args[0] {
	case "generate":
		fmt.Fprintln(stdout, store.GenerateKey())
		return nil
	case "rotate":
		return runKeysRotate(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, keysUsage)
		return nil
	}
	fmt.Fprint(stderr, keysUsage)
	return fmt.Errorf("unknown keys command %q", args[0])
}

func runKeysRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	if err := cfg.parseFlags("keys rotate", args, stderr); err != nil {
		return err
	}
	logger := newLogger(cfg.LogFormat, stderr)
	var db *store.DB
	if cfg.DatabaseURL == "" {
		// Talk to the private server of a running Studio, or start it.
		if url, err := pgserver.RunningURL(cfg.DataDir); err == nil {
			if db, err = store.Open(ctx, url); err != nil {
				return err
			}
			defer db.Close()
		}
	}
	if db == nil {
		d, err := openDatabase(ctx, &cfg, logger)
		if err != nil {
			return err
		}
		defer d.Close()
		db = d.DB
	}
	keys, err := openKeyring(ctx, &cfg, db, logger)
	if err != nil {
		return err
	}
	target := keys.IDs()[0]
	var keepOld []string
	if cfg.SecretKey == "" {
		// Key file: add a fresh key in front; the old ones stay readable.
		path := keyFilePath(&cfg)
		old, err := store.ReadKeyFile(path)
		if err != nil {
			return err
		}
		fresh := store.GenerateKey()
		if err := store.WriteKeyFile(path, append([]string{fresh}, old...)); err != nil {
			return err
		}
		k, _ := store.ParseKey(fresh)
		target = store.KeyID(k)
		keepOld = old
		fmt.Fprintf(stdout, "Wrote a new key %s first into %s.\n", target, path)
	} else if active, err := db.ActiveKeyID(ctx); err == nil && active == target {
		fmt.Fprintf(stdout, "Key %s (the first of STUDIO_SECRET_KEY) is already active; re-encrypting any value still under an older key.\n", target)
	}
	vault := store.NewVault(db, keys)
	res, err := vault.RotateKey(ctx, store.Actor{RequestID: "studio keys rotate"}, target, func(done, total int) {
		if done == total || done%500 == 0 {
			fmt.Fprintf(stdout, "Re-encrypted %d of %d values.\n", done, total)
		}
	})
	if err != nil {
		return err
	}
	if cfg.SecretKey == "" {
		// Drop the retired keys from the file; keys no value ever used stay.
		var keep []string
		for _, s := range keepOld {
			k, err := store.ParseKey(s)
			if err == nil && !slices.Contains(res.Retired, store.KeyID(k)) {
				keep = append(keep, s)
			}
		}
		fresh, err := store.ReadKeyFile(keyFilePath(&cfg))
		if err != nil {
			return err
		}
		if err := store.WriteKeyFile(keyFilePath(&cfg), append(fresh[:1], keep...)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Every value and installation secret is now encrypted with key %s (%d values and %d installation secrets re-encrypted).\n",
		res.Active, res.Reencrypted, res.Secrets)
	if len(res.Retired) > 0 {
		fmt.Fprintf(stdout, "Retired: %v.", res.Retired)
		if cfg.SecretKey != "" {
			fmt.Fprint(stdout, " Remove them from STUDIO_SECRET_KEY on every replica.")
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
