package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// KeySize is the length of a value-encryption key in bytes (AES-256).
const KeySize = 32

// ErrValueDoesNotDecrypt means a stored ciphertext did not open: it was
// altered, copied from another (environment, name, version) slot, or sealed
// under another key with the same id. It never carries any plaintext.
var ErrValueDoesNotDecrypt = errors.New("the stored value does not decrypt: it was altered or does not belong to this environment, name and version")

// keyCheckPlaintext is the known constant sealed per key in value_keys.
const keyCheckPlaintext = "skali-studio value-key check v1"

// Keyring holds the value-encryption keys the Studio was given, by key id.
// The database decides which of them is active (value_keys.state); a
// rotation makes a new key active while values under the old one stay
// readable until every value has been re-encrypted. When a row names a key
// id the keyring does not hold, the keyring reloads its source once (so a
// running Studio with a key file picks up a key that `studio keys rotate`
// added to that file).
type Keyring struct {
	mu     sync.RWMutex
	keys   map[string]cipher.AEAD
	order  []string
	source keySource
}

// keySource is where keys come from: STUDIO_SECRET_KEY or the key file.
type keySource interface {
	load() ([][]byte, error)
	describe() string
}

// envKeys is STUDIO_SECRET_KEY: base64 keys separated by commas. The first
// is the one a fresh installation starts with and the one `studio keys
// rotate` rotates to; the others stay readable.
type envKeys string

func (e envKeys) load() ([][]byte, error) {
	var out [][]byte
	for i, part := range strings.Split(string(e), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, err := ParseKey(part)
		if err != nil {
			return nil, fmt.Errorf("STUDIO_SECRET_KEY, key %d: %w", i+1, err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("STUDIO_SECRET_KEY holds no key")
	}
	return out, nil
}

func (e envKeys) describe() string { return "STUDIO_SECRET_KEY" }

// keyFile is the key file of the data directory: one base64 key per line,
// the first being the newest.
type keyFile string

func (f keyFile) load() ([][]byte, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("read the value-encryption key file: %w", err)
	}
	var out [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s, line %d: %w", string(f), i+1, err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no key", string(f))
	}
	return out, nil
}

func (f keyFile) describe() string { return string(f) }

// ParseKey decodes a base64 (standard or URL alphabet, padded or not)
// value-encryption key of KeySize bytes. Its errors never quote the input.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("the key is %d bytes; it must be base64 of exactly %d random bytes (make one with 'studio keys generate')", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("the key is not base64; it must be base64 of exactly %d random bytes (make one with 'studio keys generate')", KeySize)
}

// GenerateKey returns a fresh random key, base64-encoded.
func GenerateKey() string {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic("store: no randomness: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(k)
}

// KeyID is the id stored with every value sealed under key: a fingerprint
// (domain-separated SHA-256, 64 bits shown) that names the key without
// revealing it, the same on every replica given the same key.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("skali-studio value-key id\x00"))
	h.Write(key)
	return "k" + hex.EncodeToString(h.Sum(nil)[:8])
}

// NewKeyring returns a keyring of the given base64 keys, for tests and
// tools; the first is the one a fresh database starts with.
func NewKeyring(keys ...string) (*Keyring, error) {
	return newKeyring(envKeys(strings.Join(keys, ",")))
}

func newKeyring(src keySource) (*Keyring, error) {
	k := &Keyring{source: src}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keyring) reload() error {
	raw, err := k.source.load()
	if err != nil {
		return err
	}
	keys := make(map[string]cipher.AEAD, len(raw))
	var order []string
	for _, key := range raw {
		block, err := aes.NewCipher(key)
		if err != nil {
			return err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		id := KeyID(key)
		if _, dup := keys[id]; !dup {
			order = append(order, id)
		}
		keys[id] = aead
	}
	k.mu.Lock()
	k.keys, k.order = keys, order
	k.mu.Unlock()
	return nil
}

// IDs returns the ids of the keys held, the preferred (first) one first.
func (k *Keyring) IDs() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return append([]string(nil), k.order...)
}

// Source names where the keys come from, for messages.
func (k *Keyring) Source() string { return k.source.describe() }

func (k *Keyring) aead(id string) (cipher.AEAD, error) {
	k.mu.RLock()
	a, ok := k.keys[id]
	k.mu.RUnlock()
	if ok {
		return a, nil
	}
	// A rotation may have added a key to the source since start-up.
	if err := k.reload(); err == nil {
		k.mu.RLock()
		a, ok = k.keys[id]
		k.mu.RUnlock()
		if ok {
			return a, nil
		}
	}
	return nil, fmt.Errorf("store: value-encryption key %s is not configured (%s); a rotation may be in progress: give this Studio the new key and restart it", id, k.source.describe())
}

// valueAD binds a ciphertext to its slot: environment, version and name,
// fixed-width fields first so that no two slots share additional data.
func valueAD(envID int64, name string, version int) []byte {
	ad := make([]byte, 0, 32+len(name))
	ad = append(ad, "skali-studio value v1\x00"...)
	ad = binary.BigEndian.AppendUint64(ad, uint64(envID))
	ad = binary.BigEndian.AppendUint32(ad, uint32(version))
	return append(ad, name...)
}

// seal encrypts plaintext for one slot under key id with a fresh random nonce.
func (k *Keyring) seal(id string, envID int64, name string, version int, plaintext []byte) (nonce, ciphertext []byte, err error) {
	a, err := k.aead(id)
	if err != nil {
		return nil, nil, err
	}
	nonce = make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return nonce, a.Seal(nil, nonce, plaintext, valueAD(envID, name, version)), nil
}

// open decrypts one slot. Its only failure besides an unknown key is
// ErrValueDoesNotDecrypt, wrapped with the slot's name and version.
func (k *Keyring) open(id string, envID int64, name string, version int, nonce, ciphertext []byte) ([]byte, error) {
	a, err := k.aead(id)
	if err != nil {
		return nil, err
	}
	if len(nonce) != a.NonceSize() {
		return nil, fmt.Errorf("store: value %s (version %d) of environment %d: %w", name, version, envID, ErrValueDoesNotDecrypt)
	}
	pt, err := a.Open(nil, nonce, ciphertext, valueAD(envID, name, version))
	if err != nil {
		return nil, fmt.Errorf("store: value %s (version %d) of environment %d: %w", name, version, envID, ErrValueDoesNotDecrypt)
	}
	return pt, nil
}

func (k *Keyring) checkValue(id string) ([]byte, error) {
	a, err := k.aead(id)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return a.Seal(nonce, nonce, []byte(keyCheckPlaintext), []byte("skali-studio key check\x00"+id)), nil
}

func (k *Keyring) verifyCheck(id string, check []byte) bool {
	a, err := k.aead(id)
	if err != nil || len(check) < a.NonceSize() {
		return false
	}
	pt, err := a.Open(nil, check[:a.NonceSize()], check[a.NonceSize():], []byte("skali-studio key check\x00"+id))
	return err == nil && string(pt) == keyCheckPlaintext
}

// KeyringOptions say where the value-encryption keys come from.
type KeyringOptions struct {
	// SecretKey is STUDIO_SECRET_KEY: base64 keys separated by commas.
	SecretKey string
	// KeyFile is used when SecretKey is empty: <data-dir>/secret.key,
	// generated with mode 0600 on first start.
	KeyFile string
	Logger  *slog.Logger
}

// OpenKeyring loads the value-encryption keys and checks them against the
// database: every key the database knows and the keyring holds must open
// its check value, and the active key and every key a stored value uses
// must be held. A fresh database registers the first key as active. Any
// mismatch is an error that says what to do, so a wrong key stops the
// Studio at start-up instead of producing garbage later.
func OpenKeyring(ctx context.Context, db *DB, o KeyringOptions) (*Keyring, error) {
	var src keySource
	if o.SecretKey != "" {
		src = envKeys(o.SecretKey)
	} else {
		if o.KeyFile == "" {
			return nil, errors.New("store: no value-encryption key: set STUDIO_SECRET_KEY or a data directory")
		}
		if _, err := os.Stat(o.KeyFile); errors.Is(err, os.ErrNotExist) {
			var used int
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM value_keys WHERE state <> 'retired'`).Scan(&used); err != nil {
				return nil, fmt.Errorf("store: read value keys: %w", err)
			}
			if used > 0 {
				return nil, fmt.Errorf("the value-encryption key file %s is missing, but this database holds values encrypted with a key: "+
					"restore the file from a backup of the data directory or set STUDIO_SECRET_KEY to that key", o.KeyFile)
			}
			if err := WriteKeyFile(o.KeyFile, []string{GenerateKey()}); err != nil {
				return nil, err
			}
			if o.Logger != nil {
				o.Logger.Info("generated the value-encryption key", "file", o.KeyFile)
			}
		}
		src = keyFile(o.KeyFile)
	}
	k, err := newKeyring(src)
	if err != nil {
		return nil, fmt.Errorf("store: value-encryption key: %w", err)
	}
	if err := k.check(ctx, db); err != nil {
		return nil, err
	}
	return k, nil
}

// WriteKeyFile replaces the key file at path with keys (base64, newest
// first) atomically, with mode 0600.
func WriteKeyFile(path string, keys []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store: create %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret.key-*")
	if err != nil {
		return fmt.Errorf("store: write key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	body := "# Skali Studio value-encryption keys (base64), newest first. Keep this file secret and backed up.\n" + strings.Join(keys, "\n") + "\n"
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("store: write key file: %w", err)
	}
	return nil
}

// check verifies the keyring against value_keys (see OpenKeyring).
func (k *Keyring) check(ctx context.Context, db *DB) error {
	return db.InTx(ctx, func(tx pgx.Tx) error {
		// One replica at a time registers the first key.
		if _, err := tx.Exec(ctx, `LOCK TABLE value_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT id, check_value, state FROM value_keys`)
		type known struct {
			id, state string
			check     []byte
		}
		all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (known, error) {
			var r known
			err := row.Scan(&r.id, &r.check, &r.state)
			return r, err
		})
		if err != nil {
			return fmt.Errorf("store: read value keys: %w", err)
		}
		held := map[string]bool{}
		for _, id := range k.IDs() {
			held[id] = true
		}
		active := ""
		for _, r := range all {
			if r.state == "active" {
				active = r.id
			}
			if held[r.id] && !k.verifyCheck(r.id, r.check) {
				return fmt.Errorf("the value-encryption key %s from %s does not open its check value in the database: it is not the key the values were encrypted with", r.id, k.Source())
			}
		}
		if active == "" {
			first := k.IDs()[0]
			check, err := k.checkValue(first)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO value_keys (id, check_value, state) VALUES ($1, $2, 'active')
				ON CONFLICT (id) DO UPDATE SET state = 'active', retired_at = NULL`, first, check); err != nil {
				return fmt.Errorf("store: register value key: %w", err)
			}
			active = first
		}
		rows, _ = tx.Query(ctx, `SELECT DISTINCT key_id FROM environment_values WHERE ciphertext IS NOT NULL
			UNION SELECT DISTINCT key_id FROM value_versions`)
		used, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: read value keys in use: %w", err)
		}
		var missing []string
		for _, id := range append([]string{active}, used...) {
			if !held[id] && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("values in this database are encrypted with key %s, which %s does not hold: "+
				"configure that key (STUDIO_SECRET_KEY, or the secret.key file of the data directory that created these values); "+
				"a different key cannot read them", strings.Join(missing, ", "), k.Source())
		}
		// The installation's own secrets: a Studio whose rotation predates
		// their re-sealing may have lost their key with the retired one.
		rows, _ = tx.Query(ctx, `SELECT substr(key, length($1) + 1), split_part(value, ':', 1) FROM installation_settings
			WHERE starts_with(key, $1) ORDER BY key`, sealedPrefix)
		secrets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, KeyID string }])
		if err != nil {
			return fmt.Errorf("store: read installation secrets: %w", err)
		}
		var lost, lostKeys []string
		for _, sec := range secrets {
			if !held[sec.KeyID] {
				lost = append(lost, sec.Name)
				if !slices.Contains(lostKeys, sec.KeyID) {
					lostKeys = append(lostKeys, sec.KeyID)
				}
			}
		}
		if len(lost) > 0 {
			return fmt.Errorf("the installation's secrets %s are sealed with key %s, which %s does not hold: configure that key; "+
				"if it is lost, delete them (DELETE FROM installation_settings WHERE key IN ('sealed:%s')) and the Studio generates new ones "+
				"(the development CA is then a new one: it signs the certificates issued from then on; "+
				"without backup-target-credentials, set the S3 backup target's keys again on the installation page)",
				strings.Join(lost, ", "), strings.Join(lostKeys, ", "), k.Source(), strings.Join(lost, "', 'sealed:"))
		}
		return nil
	})
}

// RotationResult says what a key rotation did.
type RotationResult struct {
	// Active is the id of the key every value is now sealed under.
	Active string
	// Reencrypted counts the values sealed again.
	Reencrypted int
	// Secrets counts the installation's own secrets (the edge's secret, the
	// development CA's key) sealed again.
	Secrets int
	// Retired are the ids of the keys no value uses any more; they may be
	// removed from the configuration.
	Retired []string
}

// RotateKey makes newID (a key the keyring holds) the active key and
// re-encrypts every value under it, one value per short transaction, while
// the Studio keeps serving: from the switch on, new values are sealed under
// the new key; values not yet re-encrypted stay readable under the old key,
// which is retired once no value uses it. Versions do not change: a rotation
// is not a change of any value. Running it again resumes an interrupted
// rotation. progress, when not nil, is told how far it is.
func (v *Vault) RotateKey(ctx context.Context, a Actor, newID string, progress func(done, total int)) (RotationResult, error) {
	res := RotationResult{Active: newID}
	if _, err := v.keys.aead(newID); err != nil {
		return res, err
	}
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE value_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var check []byte
		err := tx.QueryRow(ctx, `SELECT check_value FROM value_keys WHERE id = $1`, newID).Scan(&check)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if check, err = v.keys.checkValue(newID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO value_keys (id, check_value, state) VALUES ($1, $2, 'readable')`, newID, check); err != nil {
				return err
			}
		case err != nil:
			return err
		case !v.keys.verifyCheck(newID, check):
			return fmt.Errorf("store: key %s does not open its check value", newID)
		}
		// Waits for writers holding the active key's row (FOR SHARE).
		if _, err := tx.Exec(ctx, `UPDATE value_keys SET state = 'readable' WHERE state = 'active' AND id <> $1`, newID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE value_keys SET state = 'active', retired_at = NULL WHERE id = $1`, newID)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("store: rotate: switch the active key: %w", err)
	}
	var total int
	if err := v.db.Pool.QueryRow(ctx, `SELECT count(*) FROM environment_values WHERE ciphertext IS NOT NULL AND key_id <> $1`, newID).Scan(&total); err != nil {
		return res, fmt.Errorf("store: rotate: %w", err)
	}
	if progress != nil {
		progress(0, total)
	}
	for {
		rows, _ := v.db.Pool.Query(ctx, `SELECT environment_id, name FROM environment_values
			WHERE ciphertext IS NOT NULL AND key_id <> $1 ORDER BY environment_id, name LIMIT 100`, newID)
		type slotID struct {
			env  int64
			name string
		}
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (slotID, error) {
			var s slotID
			err := row.Scan(&s.env, &s.name)
			return s, err
		})
		if err != nil {
			return res, fmt.Errorf("store: rotate: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		for _, s := range batch {
			sealed := false
			err := v.db.InTx(ctx, func(tx pgx.Tx) error {
				sealed = false
				cur, err := lockExisting(ctx, tx, s.env, s.name)
				if err != nil || !cur.set() || *cur.keyID == newID {
					// A write that ran meanwhile already used the new key.
					return err
				}
				pt, err := v.keys.open(*cur.keyID, s.env, s.name, cur.version, cur.nonce, cur.ciphertext)
				if err != nil {
					return err
				}
				nonce, ct, err := v.keys.seal(newID, s.env, s.name, cur.version, pt)
				clear(pt)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `UPDATE environment_values SET key_id = $3, nonce = $4, ciphertext = $5
					WHERE environment_id = $1 AND name = $2`, s.env, s.name, newID, nonce, ct)
				sealed = err == nil
				return err
			})
			if err != nil {
				return res, fmt.Errorf("store: rotate: %w", err)
			}
			if !sealed {
				continue
			}
			res.Reencrypted++
			if progress != nil {
				progress(res.Reencrypted, total)
			}
		}
	}
	// Earlier versions kept for rollbacks are sealed with the same keys.
	if err := v.resealValueVersions(ctx, newID); err != nil {
		return res, fmt.Errorf("store: rotate: %w", err)
	}
	// The installation's own secrets (the edge's, the development CA's key)
	// are sealed with the same keys: a retired key must open none of them.
	res.Secrets, err = v.resealInstallationSecrets(ctx, newID)
	if err != nil {
		return res, fmt.Errorf("store: rotate: %w", err)
	}
	err = v.db.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE value_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var left int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM environment_values WHERE ciphertext IS NOT NULL AND key_id <> $1)
			+ (SELECT count(*) FROM value_versions WHERE key_id <> $1)
			+ (SELECT count(*) FROM installation_settings WHERE starts_with(key, $2) AND split_part(value, ':', 1) <> $1)`,
			newID, sealedPrefix).Scan(&left); err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%d values or installation secrets are still under an old key; run the rotation again", left)
		}
		rows, _ := tx.Query(ctx, `UPDATE value_keys SET state = 'retired', retired_at = now() WHERE state = 'readable' RETURNING id`)
		retired, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		sort.Strings(retired)
		res.Retired = retired
		e := a.event("values.key-rotated")
		e.Target = newID
		e.Detail = map[string]any{"active": newID, "retired": nonNil(retired), "reencrypted": res.Reencrypted, "installation_secrets": res.Secrets}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return res, fmt.Errorf("store: rotate: retire old keys: %w", err)
	}
	return res, nil
}

// ActiveKeyID returns the id of the key new values are sealed under.
func (db *DB) ActiveKeyID(ctx context.Context) (string, error) {
	var id string
	err := db.Pool.QueryRow(ctx, `SELECT id FROM value_keys WHERE state = 'active'`).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("store: active key: %w", err)
	}
	return id, nil
}

// ReadKeyFile returns the base64 keys of a key file, newest first.
func ReadKeyFile(path string) ([]string, error) {
	raw, err := keyFile(path).load()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(raw))
	for i, k := range raw {
		out[i] = base64.StdEncoding.EncodeToString(k)
	}
	return out, nil
}
