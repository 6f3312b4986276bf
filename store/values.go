package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
)

// MaxValueBytes caps one value.
const MaxValueBytes = 64 << 10

// MaxValueNameLength caps a value's name. PostgreSQL's btree index cannot
// hold a key much over 2,700 bytes, and no environment variable needs more.
const MaxValueNameLength = 255

// ValidValueName reports whether name may name a value.
func ValidValueName(name string) bool {
	return len(name) <= MaxValueNameLength && compiler.IsValueName(name)
}

// ValueNameProblem says in one sentence what is wrong with name, or returns
// "" when it is a valid value name. It never quotes the name, which may be
// long or a value pasted into the wrong field.
func ValueNameProblem(name string) string {
	switch {
	case name == "":
		return "Enter the name of the value, like APP_DOMAIN."
	case len(name) > MaxValueNameLength:
		return "This name has " + humanize.TooLong(len(name), MaxValueNameLength) + "."
	case !compiler.IsValueName(name):
		return "Use capital letters, digits and underscores, not starting with a digit, like APP_DOMAIN."
	}
	return ""
}

// ValueProblem says in one sentence what makes value unusable, or returns
// "". A NUL byte cannot be passed to a process as part of an environment
// variable; every other byte, control characters and newlines included, can.
func ValueProblem(value string) string {
	switch {
	case len(value) > MaxValueBytes:
		return fmt.Sprintf("A value may be at most %d KiB.", MaxValueBytes>>10)
	case strings.IndexByte(value, 0) >= 0:
		return "The value contains a NUL byte, which cannot become an environment variable at deploy time. Remove it and save again."
	}
	return ""
}

// Vault keeps an environment's values encrypted at rest. It is the only
// code that seals or opens them: pages see names, versions, who and when;
// the deploy path reads plaintext through ResolveValuesForDeploy alone.
type Vault struct {
	db   *DB
	keys *Keyring
}

// NewVault returns the vault of db's values under keys.
func NewVault(db *DB, keys *Keyring) *Vault { return &Vault{db: db, keys: keys} }

// StoredValue is what may be said about a stored value: never the value.
type StoredValue struct {
	Name      string
	Version   int
	UpdatedBy string
	UpdatedAt time.Time
}

// StoredValues lists the environment's set values by name (no decryption).
func (db *DB) StoredValues(ctx context.Context, envID int64) ([]StoredValue, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT v.name, v.version,
		       `+userDisplayName+`,
		       v.updated_at
		FROM environment_values v LEFT JOIN users u ON u.id = v.updated_by
		WHERE v.environment_id = $1 AND v.ciphertext IS NOT NULL
		ORDER BY v.name`, envID)
	return collectStoredValues(rows)
}

// StoredValuesNamed lists the stored values among names, by name: the
// ones a contract references, read without the others.
func (db *DB) StoredValuesNamed(ctx context.Context, envID int64, names []string) ([]StoredValue, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT v.name, v.version, `+userDisplayName+`, v.updated_at
		FROM `+namedValues(`v.name, v.version, v.updated_by, v.updated_at`)+`
		LEFT JOIN users u ON u.id = v.updated_by
		ORDER BY v.name`, envID, names)
	return collectStoredValues(rows)
}

// namedValues is the FROM item of environment $1's set values among the
// names $2, with columns of environment_values v: one primary-key probe
// per name (a lateral subquery with LIMIT is never turned into a join),
// whatever the number of values the environment holds. As "v.name =
// ANY($2)", a generic plan read every set name of the environment and
// filtered them (2,000 for three).
func namedValues(columns string) string {
	return `(SELECT DISTINCT unnest($2::text[]) AS name) n CROSS JOIN LATERAL (
		SELECT ` + columns + ` FROM environment_values v
		WHERE v.environment_id = $1 AND v.name = n.name AND v.ciphertext IS NOT NULL LIMIT 1) v`
}

// OrphanedValues counts the stored values of the environment whose names
// are not among referenced and, with filter, contain it (any case); it
// reads limit of them by name from offset (none when limit is 0). The
// count is an index-only scan of environment_values_set_idx: names only,
// never the sealed values, so it stays small next to a page.
func (db *DB) OrphanedValues(ctx context.Context, envID int64, referenced []string, filter string, offset, limit int) ([]StoredValue, int, error) {
	n, err := db.OrphanedValueCount(ctx, envID, referenced, filter)
	if err != nil || limit <= 0 || offset >= n {
		return nil, n, err
	}
	out, err := db.OrphanedValuesPage(ctx, envID, referenced, filter, offset, limit)
	return out, n, err
}

// OrphanedValueCount is OrphanedValues' count alone.
func (db *DB) OrphanedValueCount(ctx context.Context, envID int64, referenced []string, filter string) (int, error) {
	where, args := orphanedWhere(envID, referenced, filter)
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM environment_values v
		WHERE v.environment_id = $1 AND v.ciphertext IS NOT NULL AND `+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: orphaned values: %w", err)
	}
	return n, nil
}

// OrphanedValuesPage is OrphanedValues' page alone, for a caller that
// has counted them already.
func (db *DB) OrphanedValuesPage(ctx context.Context, envID int64, referenced []string, filter string, offset, limit int) ([]StoredValue, error) {
	if limit <= 0 {
		return nil, nil
	}
	where, args := orphanedWhere(envID, referenced, filter)
	return db.storedValuesWhere(ctx, where, fmt.Sprintf(` OFFSET %d LIMIT %d`, max(offset, 0), limit), args...)
}

func orphanedWhere(envID int64, referenced []string, filter string) (string, []any) {
	where, args := `v.name <> ALL($2)`, []any{envID, referenced}
	if filter != "" {
		where += ` AND strpos(lower(v.name), lower($3)) > 0`
		args = append(args, filter)
	}
	return where, args
}

// StoredValueNames lists the names of the environment's set values, by
// name (an index-only scan: no sealed value is read).
func (db *DB) StoredValueNames(ctx context.Context, envID int64) ([]string, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT name FROM environment_values
		WHERE environment_id = $1 AND ciphertext IS NOT NULL ORDER BY name`, envID)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: stored value names: %w", err)
	}
	return out, nil
}

// StoredValueNamesAmong lists which of names are set for the
// environment, by name (a probe per name: namedValues).
func (db *DB) StoredValueNamesAmong(ctx context.Context, envID int64, names []string) ([]string, error) {
	rows, _ := db.Pool.Query(ctx, `SELECT v.name FROM `+namedValues(`v.name`)+` ORDER BY v.name`, envID, names)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: stored value names: %w", err)
	}
	return out, nil
}

func (db *DB) storedValuesWhere(ctx context.Context, where, page string, args ...any) ([]StoredValue, error) {
	rows, _ := db.Pool.Query(ctx, `
		SELECT v.name, v.version,
		       `+userDisplayName+`,
		       v.updated_at
		FROM environment_values v LEFT JOIN users u ON u.id = v.updated_by
		WHERE v.environment_id = $1 AND v.ciphertext IS NOT NULL AND `+where+`
		ORDER BY v.name`+page, args...)
	return collectStoredValues(rows)
}

// collectStoredValues reads rows of (name, version, set by, set at).
func collectStoredValues(rows pgx.Rows) ([]StoredValue, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredValue, error) {
		var s StoredValue
		err := row.Scan(&s.Name, &s.Version, &s.UpdatedBy, &s.UpdatedAt)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: stored values: %w", err)
	}
	return out, nil
}

// ContractNames lists every name c references.
func ContractNames(c compiler.ValueContract) []string {
	out := slices.Clone(c.Required)
	for n := range c.Optional {
		out = append(out, n)
	}
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}

// ValueStateKind is the state of one value name in an environment.
type ValueStateKind string

// The states of a value name.
const (
	RequiredSet     ValueStateKind = "required · set"
	RequiredMissing ValueStateKind = "required · missing"
	OptionalDefault ValueStateKind = "optional · default used"
	OptionalSet     ValueStateKind = "optional · set"
	// Orphaned values are stored but no longer referenced; deploys ignore them.
	Orphaned ValueStateKind = "orphaned"
)

// ValueState is one name the manifest references or the environment stores.
type ValueState struct {
	Name  string
	State ValueStateKind
	// Default is the inline default of an optional value.
	Default string
	// Stored is nil when no value is stored.
	Stored *StoredValue
}

// ValueStates combines the value contract with what is stored: required
// names first, then optional, then orphaned, each by name.
func ValueStates(c compiler.ValueContract, stored []StoredValue) []ValueState {
	byName := map[string]*StoredValue{}
	for i := range stored {
		byName[stored[i].Name] = &stored[i]
	}
	var out []ValueState
	required := append([]string(nil), c.Required...)
	sort.Strings(required)
	for _, n := range required {
		s := ValueState{Name: n, State: RequiredMissing, Stored: byName[n]}
		if s.Stored != nil {
			s.State = RequiredSet
		}
		out = append(out, s)
	}
	var optional []string
	for n := range c.Optional {
		optional = append(optional, n)
	}
	sort.Strings(optional)
	for _, n := range optional {
		s := ValueState{Name: n, State: OptionalDefault, Default: c.Optional[n], Stored: byName[n]}
		if s.Stored != nil {
			s.State = OptionalSet
		}
		out = append(out, s)
	}
	for i := range stored {
		if !References(c, stored[i].Name) {
			out = append(out, ValueState{Name: stored[i].Name, State: Orphaned, Stored: &stored[i]})
		}
	}
	return out
}

// References reports whether the contract mentions name.
func References(c compiler.ValueContract, name string) bool {
	if _, ok := c.Optional[name]; ok {
		return true
	}
	return slices.Contains(c.Required, name)
}

// UnionContract merges the contracts of several revisions (the latest and
// the one an environment runs): a name required by any is required; an
// optional name keeps the default of the first contract that has it. A
// value either revision uses is therefore never orphaned.
func UnionContract(cs ...compiler.ValueContract) compiler.ValueContract {
	out := compiler.ValueContract{Required: []string{}, Optional: map[string]string{}}
	for _, c := range cs {
		for _, n := range c.Required {
			if !slices.Contains(out.Required, n) {
				out.Required = append(out.Required, n)
			}
		}
	}
	for _, c := range cs {
		for n, d := range c.Optional {
			if _, ok := out.Optional[n]; !ok && !slices.Contains(out.Required, n) {
				out.Optional[n] = d
			}
		}
	}
	sort.Strings(out.Required)
	return out
}

// activeKey returns the id of the key new values are sealed under, holding
// a share lock so a rotation cannot switch keys under this transaction.
//
// A rotation switches the active key in one transaction, yet a SELECT ...
// FOR SHARE that waited for it re-checks only the row it had found (the old
// key, now no longer active) and cannot see the new one in its snapshot, so
// it finds nothing. The next statement of this read-committed transaction
// takes a fresh snapshot and sees the new key: ask again before giving up.
func activeKey(ctx context.Context, tx pgx.Tx) (string, error) {
	for attempt := 0; ; attempt++ {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM value_keys WHERE state = 'active' FOR SHARE`).Scan(&id)
		if !errors.Is(err, pgx.ErrNoRows) {
			return id, err
		}
		if attempt == 2 {
			return "", errors.New("store: no active value-encryption key (the keyring was not opened)")
		}
	}
}

// slot is one environment_values row, locked for update.
type slot struct {
	name       string
	exists     bool
	version    int
	keyID      *string
	nonce      []byte
	ciphertext []byte
}

// lockSlot locks the row of name, which need not exist yet.
func lockSlot(ctx context.Context, tx pgx.Tx, envID int64, name string) (slot, error) {
	slots, err := lockSlots(ctx, tx, envID, []string{name})
	if err != nil {
		return slot{}, err
	}
	return slots[name], nil
}

// lockSlots locks the rows of names in two round trips, whether or not they
// exist yet. A name without a row first gets an empty one at version 0: two
// writers of a new name otherwise both see no row, both compute version 1,
// and the later upsert rolls the earlier one back. With the row in place the
// second writer waits on the first one's lock and reads its version.
// Rows are created and locked in name order, so that two writers of
// overlapping sets cannot deadlock.
func lockSlots(ctx context.Context, tx pgx.Tx, envID int64, names []string) (map[string]slot, error) {
	sorted := slices.Sorted(slices.Values(names))
	if _, err := tx.Exec(ctx, `
		INSERT INTO environment_values (environment_id, name, version)
		SELECT $1, n, 0 FROM unnest($2::text[]) AS n ORDER BY n
		ON CONFLICT (environment_id, name) DO NOTHING`, envID, sorted); err != nil {
		return nil, err
	}
	rows, _ := tx.Query(ctx, `SELECT name, version, key_id, nonce, ciphertext FROM environment_values
		WHERE environment_id = $1 AND name = ANY($2) ORDER BY name FOR UPDATE`, envID, sorted)
	out := make(map[string]slot, len(names))
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		s := slot{exists: true}
		err := row.Scan(&s.name, &s.version, &s.keyID, &s.nonce, &s.ciphertext)
		out[s.name] = s
		return struct{}{}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockExisting locks the row of name if there is one, creating none: for
// changes that only ever touch a stored value (delete, prune, rotation).
func lockExisting(ctx context.Context, tx pgx.Tx, envID int64, name string) (slot, error) {
	s := slot{name: name}
	err := tx.QueryRow(ctx, `SELECT version, key_id, nonce, ciphertext FROM environment_values
		WHERE environment_id = $1 AND name = $2 FOR UPDATE`, envID, name).Scan(&s.version, &s.keyID, &s.nonce, &s.ciphertext)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return slot{}, err
	}
	s.exists = true
	return s, nil
}

func (s slot) set() bool { return s.exists && s.ciphertext != nil }

// write seals value as the slot's next version and returns that version.
// The slot's row must exist and be locked (lockSlots).
func (v *Vault) write(ctx context.Context, tx pgx.Tx, a Actor, keyID string, envID int64, name, value string, s slot) (int, error) {
	if p := ValueProblem(value); p != "" {
		return 0, apperr.Errorf(apperr.Invalid, "%s: %s", name, p)
	}
	version := s.version + 1
	nonce, ct, err := v.keys.seal(keyID, envID, name, version, []byte(value))
	if err != nil {
		return 0, err
	}
	_, err = tx.Exec(ctx, `
		UPDATE environment_values SET version = $3, key_id = $4, nonce = $5, ciphertext = $6, updated_by = $7, updated_at = now()
		WHERE environment_id = $1 AND name = $2`,
		envID, name, version, keyID, nonce, ct, a.userID())
	if err != nil {
		return 0, err
	}
	return version, nil
}

func envEvent(a Actor, action string, env *Environment) AuditEvent {
	e := a.event(action)
	e.Project, e.Environment, e.EnvironmentID = env.Project, env.Name, &env.ID
	return e
}

// SetValue stores value as the next version of name in env (an empty
// string is a real value) and records value.set with the name and version.
func (v *Vault) SetValue(ctx context.Context, a Actor, env *Environment, name, value string) (int, error) {
	if p := ValueNameProblem(name); p != "" {
		return 0, apperr.Errorf(apperr.Invalid, "%s", p)
	}
	if p := ValueProblem(value); p != "" {
		return 0, apperr.Errorf(apperr.Invalid, "%s", p)
	}
	var version int
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		s, err := lockSlot(ctx, tx, env.ID, name)
		if err != nil {
			return err
		}
		if version, err = v.write(ctx, tx, a, keyID, env.ID, name, value, s); err != nil {
			return err
		}
		e := envEvent(a, "value.set", env)
		e.Target = name
		e.Detail = map[string]any{"name": name, "version": version}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("store: set value %s: %w", name, err)
	}
	return version, nil
}

// DeleteValue removes the value of name from env. The row keeps its version
// so a later value continues the count. It records value.deleted.
func (v *Vault) DeleteValue(ctx context.Context, a Actor, env *Environment, name string) (int, error) {
	var version int
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		s, err := lockExisting(ctx, tx, env.ID, name)
		if err != nil {
			return err
		}
		if !s.set() {
			return apperr.Errorf(apperr.NotFound, "%s has no stored value in %s.", name, env.Name)
		}
		if err := clearSlot(ctx, tx, a, env.ID, name); err != nil {
			return err
		}
		version = s.version
		e := envEvent(a, "value.deleted", env)
		e.Target = name
		e.Detail = map[string]any{"name": name, "version": version}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete value %s: %w", name, err)
	}
	return version, nil
}

func clearSlot(ctx context.Context, tx pgx.Tx, a Actor, envID int64, name string) error {
	_, err := tx.Exec(ctx, `UPDATE environment_values SET key_id = NULL, nonce = NULL, ciphertext = NULL, updated_by = $3, updated_at = now()
		WHERE environment_id = $1 AND name = $2`, envID, name, a.userID())
	return err
}

// PruneValues deletes the named values of env that the contract does not
// reference (names that are referenced again, or not stored, are left
// alone) and records values.pruned. It returns the names it deleted.
func (v *Vault) PruneValues(ctx context.Context, a Actor, env *Environment, c compiler.ValueContract, names []string) ([]string, error) {
	var pruned []string
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		sorted := append([]string(nil), names...)
		sort.Strings(sorted)
		var detail []map[string]any
		for _, n := range sorted {
			if References(c, n) || slices.Contains(pruned, n) {
				continue
			}
			s, err := lockExisting(ctx, tx, env.ID, n)
			if err != nil {
				return err
			}
			if !s.set() {
				continue
			}
			if err := clearSlot(ctx, tx, a, env.ID, n); err != nil {
				return err
			}
			pruned = append(pruned, n)
			detail = append(detail, map[string]any{"name": n, "version": s.version})
		}
		if len(pruned) == 0 {
			return nil
		}
		e := envEvent(a, "values.pruned", env)
		e.Target = fmt.Sprintf("%d values", len(pruned))
		e.Detail = map[string]any{"values": detail}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return nil, fmt.Errorf("store: prune values: %w", err)
	}
	return pruned, nil
}

// ImportResult says what an import did, by name only.
type ImportResult struct {
	// Changed are the names that got a new version, with that version.
	Changed []NameVersion
	// Unchanged are names whose stored value already equalled the import.
	Unchanged []string
	// Skipped are names the manifest does not reference.
	Skipped []string
}

// NameVersion is a value name and one of its versions.
type NameVersion struct {
	Name    string
	Version int
}

// ImportValues stores the entries of a parsed dotenv file in one
// transaction, all or nothing. Names the contract does not reference are
// skipped; a name gets a new version only when its value differs from the
// stored one (compared here, inside the store: plaintext never leaves it).
// It records values.imported with the changed names and their versions.
func (v *Vault) ImportValues(ctx context.Context, a Actor, env *Environment, c compiler.ValueContract, entries []DotenvEntry) (ImportResult, error) {
	var res ImportResult
	seen := map[string]bool{}
	var keep []DotenvEntry
	for _, en := range entries {
		if seen[en.Name] {
			return ImportResult{}, apperr.Errorf(apperr.Invalid, "%s appears more than once.", en.Name)
		}
		if p := ValueProblem(en.Value); p != "" {
			return ImportResult{}, apperr.Errorf(apperr.Invalid, "Line %d, %s: %s", en.Line, en.Name, p)
		}
		seen[en.Name] = true
		if References(c, en.Name) {
			keep = append(keep, en)
		} else {
			res.Skipped = append(res.Skipped, en.Name)
		}
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].Name < keep[j].Name })
	sort.Strings(res.Skipped)
	err := v.db.InTx(ctx, func(tx pgx.Tx) error {
		keyID, err := activeKey(ctx, tx)
		if err != nil {
			return err
		}
		names := make([]string, len(keep))
		for i, en := range keep {
			names[i] = en.Name
		}
		slots, err := lockSlots(ctx, tx, env.ID, names)
		if err != nil {
			return err
		}
		var w batchWrite
		for _, en := range keep {
			s := slots[en.Name]
			if s.set() {
				old, err := v.keys.open(*s.keyID, env.ID, en.Name, s.version, s.nonce, s.ciphertext)
				if err != nil {
					return err
				}
				same := bytes.Equal(old, []byte(en.Value))
				clear(old)
				if same {
					res.Unchanged = append(res.Unchanged, en.Name)
					continue
				}
			}
			version := s.version + 1
			nonce, ct, err := v.keys.seal(keyID, env.ID, en.Name, version, []byte(en.Value))
			if err != nil {
				return err
			}
			w.add(en.Name, version, nonce, ct)
			res.Changed = append(res.Changed, NameVersion{Name: en.Name, Version: version})
		}
		if err := w.exec(ctx, tx, env.ID, keyID, a.userID()); err != nil {
			return err
		}
		changed := make([]map[string]any, 0, len(res.Changed))
		for _, nv := range res.Changed {
			changed = append(changed, map[string]any{"name": nv.Name, "version": nv.Version})
		}
		e := envEvent(a, "values.imported", env)
		e.Target = fmt.Sprintf("%d changed", len(res.Changed))
		e.Detail = map[string]any{"changed": changed, "unchanged": nonNil(res.Unchanged), "skipped": nonNil(res.Skipped)}
		return auditTx(ctx, tx, e)
	})
	if err != nil {
		return ImportResult{}, fmt.Errorf("store: import values: %w", err)
	}
	return res, nil
}

// batchWrite collects new versions of several values, to be stored in one
// statement: an import of thousands of lines costs a few round trips, not
// one per line.
type batchWrite struct {
	names       []string
	versions    []int32
	nonces, cts [][]byte
}

func (b *batchWrite) add(name string, version int, nonce, ciphertext []byte) {
	b.names = append(b.names, name)
	b.versions = append(b.versions, int32(version))
	b.nonces = append(b.nonces, nonce)
	b.cts = append(b.cts, ciphertext)
}

// exec stores the collected versions; their rows must exist and be locked.
func (b *batchWrite) exec(ctx context.Context, tx pgx.Tx, envID int64, keyID string, by *int64) error {
	if len(b.names) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		UPDATE environment_values v SET version = n.version, key_id = $2, nonce = n.nonce, ciphertext = n.ciphertext,
			updated_by = $3, updated_at = now()
		FROM unnest($4::text[], $5::int[], $6::bytea[], $7::bytea[]) AS n (name, version, nonce, ciphertext)
		WHERE v.environment_id = $1 AND v.name = n.name`,
		envID, keyID, by, b.names, b.versions, b.nonces, b.cts)
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ResolveValuesForDeploy returns the plaintext of every value stored for
// the environment, by name. It is the one function through which plaintext
// leaves the store, and only the deploy path may call it: never log, show,
// audit or return its result to a browser. A value that does not decrypt
// fails the whole call with an error naming the value and version only.
func (v *Vault) ResolveValuesForDeploy(ctx context.Context, envID int64) (map[string]string, error) {
	return v.openValues(ctx, envID, nil)
}

// openValues decrypts the environment's stored values by name: all of them
// when names is nil, else only those named.
func (v *Vault) openValues(ctx context.Context, envID int64, names []string) (map[string]string, error) {
	rows, _ := v.db.Pool.Query(ctx, `SELECT name, version, key_id, nonce, ciphertext FROM environment_values
		WHERE environment_id = $1 AND ciphertext IS NOT NULL AND ($2::text[] IS NULL OR name = ANY($2))`, envID, names)
	type sealed struct {
		name, keyID       string
		version           int
		nonce, ciphertext []byte
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sealed, error) {
		var s sealed
		err := row.Scan(&s.name, &s.version, &s.keyID, &s.nonce, &s.ciphertext)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read values: %w", err)
	}
	out := make(map[string]string, len(all))
	for _, s := range all {
		pt, err := v.keys.open(s.keyID, envID, s.name, s.version, s.nonce, s.ciphertext)
		if err != nil {
			return nil, err
		}
		out[s.name] = string(pt)
	}
	return out, nil
}

// ResolvedHost is a hostname expression with the environment's values filled in.
type ResolvedHost struct {
	Name string
	// Missing names the values the expression needs that are not set and
	// have no default; Name is then empty, since a partial expansion could
	// carry the values that are set.
	Missing []string
	// NotAHostname is true when the values expand to something that is not
	// a lowercase DNS name; Name is then empty, because the values were
	// evidently not hostnames and may be secrets.
	NotAHostname bool
}

// hostnamePattern is a lowercase DNS name of at least two labels, each of 1
// to 63 letters, digits and inner hyphens (route domains take no wildcard).
var hostnamePattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// isHostname reports whether s is a lowercase DNS name of at most 253
// characters with at least two labels.
func isHostname(s string) bool { return len(s) <= 253 && hostnamePattern.MatchString(s) }

// ResolveActiveHostnames expands the hostname expressions (route domains,
// route aliases, bucket route domains) of the revision active in the
// environment with the environment's values, keyed by expression. It reads
// that revision's stored definition itself: by design, no caller can ask it
// to expand the expressions of any other revision.
//
// Why only the active revision: anyone who may add a revision to a project
// (an admin of any of its environments) writes its expressions, so a
// revision could put any value of any environment into a hostname
// (`aliases: ["${SESSION_SECRET}.x.example"]`) and every viewer would read
// it. The active revision is the one this environment's own deployers chose
// to deploy, and once deployed its hostnames are public anyway. Before the
// first deploy it returns an empty map, and pages show the expressions.
//
// Only the values these expressions reference are decrypted, and nothing
// but the expanded hostnames is returned. An expansion that is not a DNS
// name (a password put in a domain) is still withheld.
func (v *Vault) ResolveActiveHostnames(ctx context.Context, envID int64) (map[string]ResolvedHost, error) {
	var raw []byte
	err := v.db.Pool.QueryRow(ctx, `
		SELECT r.definition FROM environments e JOIN revisions r ON r.id = e.active_revision_id
		WHERE e.id = $1`, envID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return map[string]ResolvedHost{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: active definition: %w", err)
	}
	var def compiler.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, fmt.Errorf("store: decode active definition: %w", err)
	}
	return v.resolveHostnames(ctx, envID, &def)
}

// ResolvePlannedHostnames expands the hostname expressions of def, a
// revision about to be deployed to the environment, for the deploy plan and
// the deploy run. Unlike ResolveActiveHostnames it takes any definition, so
// its result may be shown only to the environment's deployers and admins:
// the people who may deploy that revision and so publish those hostnames
// anyway (the plan flags a hostname built from a value used elsewhere).
func (v *Vault) ResolvePlannedHostnames(ctx context.Context, envID int64, def *compiler.Definition) (map[string]ResolvedHost, error) {
	return v.resolveHostnames(ctx, envID, def)
}

func (v *Vault) resolveHostnames(ctx context.Context, envID int64, def *compiler.Definition) (map[string]ResolvedHost, error) {
	exprs, names := hostnameExpressions(def)
	values := map[string]string{}
	if len(names) > 0 {
		var err error
		if values, err = v.openValues(ctx, envID, names); err != nil {
			return nil, err
		}
	}
	return expandHostnames(exprs, values), nil
}

// hostnameExpressions are def's hostname expressions (route domains,
// aliases, bucket route domains) and the values they reference.
func hostnameExpressions(def *compiler.Definition) (exprs, names []string) {
	if def != nil {
		for _, app := range def.Applications {
			for _, rt := range app.Routes {
				exprs = append(exprs, rt.Domain)
				exprs = append(exprs, rt.Aliases...)
			}
		}
		for _, b := range def.Buckets {
			if b.Route != nil {
				exprs = append(exprs, b.Route.Domain)
			}
		}
	}
	for _, e := range exprs {
		for _, n := range compiler.ValueRefs(e) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return exprs, names
}

// expandHostnames expands exprs with values, keyed by expression.
func expandHostnames(exprs []string, values map[string]string) map[string]ResolvedHost {
	out := make(map[string]ResolvedHost, len(exprs))
	for _, e := range exprs {
		name, missing := compiler.ExpandValues(e, values)
		switch {
		case len(missing) > 0:
			out[e] = ResolvedHost{Missing: missing}
		case !isHostname(name):
			out[e] = ResolvedHost{NotAHostname: true}
		default:
			out[e] = ResolvedHost{Name: name}
		}
	}
	return out
}
