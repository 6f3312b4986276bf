package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/store/storetest"
)

type valuesFixture struct {
	db    *store.DB
	vault *store.Vault
	keys  *store.Keyring
	actor store.Actor
	env   *store.Environment
	other *store.Environment
}

func newValuesFixture(t *testing.T, keys ...string) *valuesFixture {
	return newValuesFixtureTB(t, keys...)
}

func newValuesFixtureTB(t testing.TB, keys ...string) *valuesFixture {
	t.Helper()
	ctx := context.Background()
	db := storetest.NewDB(t)
	if len(keys) == 0 {
		keys = []string{store.GenerateKey()}
	}
	k, err := store.OpenKeyring(ctx, db, store.KeyringOptions{SecretKey: strings.Join(keys, ",")})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := db.UpsertSignIn(ctx, "https://idp.example", "ada", "ada@example.com", "Ada", true)
	if err != nil {
		t.Fatal(err)
	}
	a := store.Actor{User: admin, RequestID: "req"}
	p, _, err := db.CreateProject(ctx, a, store.NewRevision{Name: "wiki", Source: "name: wiki\n", Canonical: []byte(`{"name":"wiki"}`), Hash: "sha256:1"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := db.CreateEnvironment(ctx, a, p.ID, "production")
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.CreateEnvironment(ctx, a, p.ID, "staging")
	if err != nil {
		t.Fatal(err)
	}
	return &valuesFixture{db: db, vault: store.NewVault(db, k), keys: k, actor: a, env: env, other: other}
}

var contract = compiler.ValueContract{Required: []string{"APP_DOMAIN", "SESSION_SECRET"}, Optional: map[string]string{"LOG_LEVEL": "info"}}

func TestValuesAreVersionedAndDecryptOnlyForDeploys(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	for i, want := range []int{1, 2, 3} {
		v, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", fmt.Sprintf("secret-%d", i))
		if err != nil || v != want {
			t.Fatalf("set #%d: version %d err %v, want version %d", i, v, err, want)
		}
	}
	if v, err := f.vault.SetValue(ctx, f.actor, f.env, "EMPTY", ""); err != nil || v != 1 {
		t.Fatalf("set empty: version %d err %v", v, err)
	}
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "lower", "x"); apperr.CodeOf(err) != apperr.Invalid {
		t.Errorf("name lower: code %q, want invalid", apperr.CodeOf(err))
	}
	got, err := f.vault.ResolveValuesForDeploy(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got["SESSION_SECRET"] != "secret-2" {
		t.Errorf("SESSION_SECRET resolves to the wrong version")
	}
	if v, ok := got["EMPTY"]; !ok || v != "" {
		t.Errorf("EMPTY: present=%v, want a real empty string", ok)
	}
	// Deleting keeps the count: the next value is version 4, not 1.
	if v, err := f.vault.DeleteValue(ctx, f.actor, f.env, "SESSION_SECRET"); err != nil || v != 3 {
		t.Fatalf("delete: version %d err %v", v, err)
	}
	if _, err := f.vault.DeleteValue(ctx, f.actor, f.env, "SESSION_SECRET"); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("second delete: code %q, want not_found", apperr.CodeOf(err))
	}
	if v, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", "again"); err != nil || v != 4 {
		t.Errorf("set after delete: version %d err %v, want 4", v, err)
	}
	stored, _ := f.db.StoredValues(ctx, f.env.ID)
	if len(stored) != 2 || stored[1].Name != "SESSION_SECRET" || stored[1].Version != 4 || stored[1].UpdatedBy != "Ada" {
		t.Errorf("stored = %+v", stored)
	}
	var actions []string
	rows, _ := f.db.Pool.Query(ctx, `SELECT action || ' ' || (detail->>'name') || ' v' || (detail->>'version') FROM audit_events WHERE action LIKE 'value.%' ORDER BY id`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		actions = append(actions, s)
	}
	want := "value.set SESSION_SECRET v1,value.set SESSION_SECRET v2,value.set SESSION_SECRET v3,value.set EMPTY v1,value.deleted SESSION_SECRET v3,value.set SESSION_SECRET v4"
	if strings.Join(actions, ",") != want {
		t.Errorf("audit = %v\nwant   %s", actions, want)
	}
}

func TestValueStatesAndOrphans(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	for _, n := range []string{"APP_DOMAIN", "LOG_LEVEL", "OLD_TOKEN", "LEGACY"} {
		if _, err := f.vault.SetValue(ctx, f.actor, f.env, n, "x"); err != nil {
			t.Fatal(err)
		}
	}
	stored, _ := f.db.StoredValues(ctx, f.env.ID)
	var got []string
	for _, s := range store.ValueStates(contract, stored) {
		got = append(got, s.Name+"="+string(s.State))
	}
	want := "APP_DOMAIN=required · set,SESSION_SECRET=required · missing,LOG_LEVEL=optional · set,LEGACY=orphaned,OLD_TOKEN=orphaned"
	if strings.Join(got, ",") != want {
		t.Errorf("states = %v\nwant     %s", got, want)
	}
	// Pruning deletes only what is orphaned, whatever the form says.
	pruned, err := f.vault.PruneValues(ctx, f.actor, f.env, contract, []string{"OLD_TOKEN", "APP_DOMAIN", "LEGACY", "NEVER_SET"})
	if err != nil || strings.Join(pruned, ",") != "LEGACY,OLD_TOKEN" {
		t.Fatalf("pruned %v err %v, want LEGACY,OLD_TOKEN", pruned, err)
	}
	stored, _ = f.db.StoredValues(ctx, f.env.ID)
	if len(stored) != 2 {
		t.Errorf("after prune %d values stored, want 2", len(stored))
	}
	u := store.UnionContract(compiler.ValueContract{Required: []string{"A"}, Optional: map[string]string{"B": "1"}},
		compiler.ValueContract{Required: []string{"B"}, Optional: map[string]string{"C": "2"}})
	if strings.Join(u.Required, ",") != "A,B" || len(u.Optional) != 1 || u.Optional["C"] != "2" {
		t.Errorf("union = %+v", u)
	}
}

func TestImportIsAllOrNothingAndVersionsOnlyChanges(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "APP_DOMAIN", "wiki.example.com"); err != nil {
		t.Fatal(err)
	}
	entries, err := store.ParseDotenv("APP_DOMAIN=wiki.example.com\nSESSION_SECRET=s3cret\nUNUSED=1\n")
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.vault.ImportValues(ctx, f.actor, f.env, contract, entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 1 || res.Changed[0] != (store.NameVersion{Name: "SESSION_SECRET", Version: 1}) ||
		strings.Join(res.Unchanged, ",") != "APP_DOMAIN" || strings.Join(res.Skipped, ",") != "UNUSED" {
		t.Errorf("import = %+v", res)
	}
	// A failing import (one value too large, sorted last) changes nothing,
	// not even the names before it.
	big := strings.Repeat("x", store.MaxValueBytes+1)
	_, err = f.vault.ImportValues(ctx, f.actor, f.env, contract, []store.DotenvEntry{
		{Name: "APP_DOMAIN", Value: "changed.example.com", Line: 1},
		{Name: "LOG_LEVEL", Value: "debug", Line: 2},
		{Name: "SESSION_SECRET", Value: big, Line: 3},
	})
	if apperr.CodeOf(err) != apperr.Invalid {
		t.Fatalf("oversized import: code %q, want invalid", apperr.CodeOf(err))
	}
	if strings.Contains(err.Error(), "xxxx") {
		t.Error("the error quotes the value")
	}
	stored, _ := f.db.StoredValues(ctx, f.env.ID)
	if len(stored) != 2 || stored[0].Name != "APP_DOMAIN" || stored[0].Version != 1 || stored[1].Version != 1 {
		t.Errorf("after the failed import: %+v, want APP_DOMAIN v1 and SESSION_SECRET v1 only", stored)
	}
	got, _ := f.vault.ResolveValuesForDeploy(ctx, f.env.ID)
	if got["APP_DOMAIN"] != "wiki.example.com" {
		t.Error("the failed import changed APP_DOMAIN")
	}
	var imports int
	_ = f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action = 'values.imported'`).Scan(&imports)
	if imports != 1 {
		t.Errorf("%d values.imported records, want 1 (the failed import leaves none)", imports)
	}
}

func TestDotenvSyntax(t *testing.T) {
	src := "# a comment\n\nexport A=plain value # trailing comment\nB = 'single # not a comment \\' quote'\r\n" +
		"C=\"line1\\nline2\\t\\\"q\\\" \\\\ \\$HOME\"\nD=\"multi\nline\nvalue\" # done\nE=\nF=a#b\nG=${NOT_EXPANDED}\n  export   H='x'\n"
	entries, err := store.ParseDotenv(src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"A": "plain value", "B": "single # not a comment ' quote", "C": "line1\nline2\t\"q\" \\ $HOME",
		"D": "multi\nline\nvalue", "E": "", "F": "a#b", "G": "${NOT_EXPANDED}", "H": "x",
	}
	lines := map[string]int{"A": 3, "B": 4, "C": 5, "D": 6, "E": 9, "F": 10, "G": 11, "H": 12}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		if e.Value != want[e.Name] {
			t.Errorf("%s: value differs (len %d, want len %d)", e.Name, len(e.Value), len(want[e.Name]))
		}
		if e.Line != lines[e.Name] {
			t.Errorf("%s: line %d, want %d", e.Name, e.Line, lines[e.Name])
		}
	}
	const secret = "hunter2-TOPSECRET"
	for _, tc := range []struct{ src, want string }{
		{"A=1\nB=2\nA=3\nB=4\nC=5\n", "A is set on lines 1 and 3; B is set on lines 2 and 4"},
		{"A=1\n" + secret + "\n", "Line 2: expected NAME=value"},
		{"A=\"" + secret + "\nB=2\n", "Line 1: the double-quoted value that starts here is never closed"},
		{"A='" + secret + "' " + secret + "\n", "Line 1: unexpected text after the closing quote"},
		{"1A=" + secret + "\n", "Line 1: expected NAME=value"},
	} {
		_, err := store.ParseDotenv(tc.src)
		if err == nil || apperr.CodeOf(err) != apperr.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("a dotenv error quotes the file's text")
		}
	}
}

func TestTamperedCiphertextsNeverDecrypt(t *testing.T) {
	k, err := store.NewKeyring(store.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	id := k.IDs()[0]
	const tries = 3000
	names := []string{"APP_DOMAIN", "SESSION_SECRET", "STRIPE_KEY"}
	failures := 0
	for i := 0; i < tries; i++ {
		plaintext := make([]byte, 16+mrand.IntN(64))
		_, _ = rand.Read(plaintext)
		env, name, version := int64(1+mrand.IntN(5)), names[mrand.IntN(3)], 1+mrand.IntN(5)
		nonce, ct, err := k.SealForTest(id, env, name, version, plaintext)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.OpenForTest(id, env, name, version, nonce, ct); err != nil || !bytes.Equal(got, plaintext) {
			t.Fatalf("try %d: the untouched slot does not open", i)
		}
		// One tampering per try, cycling through the four kinds.
		e2, n2, v2, nonce2, ct2 := env, name, version, bytes.Clone(nonce), bytes.Clone(ct)
		switch i % 4 {
		case 0:
			e2 = env + 1 + int64(mrand.IntN(1000))
		case 1:
			n2 = names[(mrand.IntN(2)+1+indexOf(names, name))%3]
		case 2:
			v2 = version + 1 + mrand.IntN(10)
		case 3:
			all := append(nonce2, ct2...)
			bit := mrand.IntN(len(all) * 8)
			all[bit/8] ^= 1 << (bit % 8)
			nonce2, ct2 = all[:len(nonce2)], all[len(nonce2):]
		}
		got, err := k.OpenForTest(id, e2, n2, v2, nonce2, ct2)
		if err == nil {
			failures++
			continue
		}
		if got != nil || !errors.Is(err, store.ErrValueDoesNotDecrypt) || bytes.Contains([]byte(err.Error()), plaintext) {
			t.Fatalf("try %d: the error is not ErrValueDoesNotDecrypt or carries data", i)
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d tampered ciphertexts decrypted, want none", failures, tries)
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestCiphertextCopiedInTheDatabaseDoesNotDecrypt(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	const secret = "the-production-secret"
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", secret); err != nil {
		t.Fatal(err)
	}
	for _, copyTo := range []struct {
		what     string
		env      int64
		name     string
		newValue string
	}{
		{"another environment", f.other.ID, "SESSION_SECRET", "staging"},
		{"another name", f.env.ID, "APP_DOMAIN", "wiki.example.com"},
	} {
		env := f.env
		if copyTo.env == f.other.ID {
			env = f.other
		}
		if _, err := f.vault.SetValue(ctx, f.actor, env, copyTo.name, copyTo.newValue); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.Pool.Exec(ctx, `UPDATE environment_values d SET nonce = s.nonce, ciphertext = s.ciphertext
			FROM environment_values s WHERE s.environment_id = $1 AND s.name = 'SESSION_SECRET'
			AND d.environment_id = $2 AND d.name = $3`, f.env.ID, copyTo.env, copyTo.name); err != nil {
			t.Fatal(err)
		}
		_, err := f.vault.ResolveValuesForDeploy(ctx, copyTo.env)
		if !errors.Is(err, store.ErrValueDoesNotDecrypt) || strings.Contains(err.Error(), secret) {
			t.Errorf("copied into %s: err %v, want ErrValueDoesNotDecrypt without the value", copyTo.what, err)
		}
		// Put the slot right again for the next case.
		if _, err := f.vault.SetValue(ctx, f.actor, env, copyTo.name, copyTo.newValue); err != nil {
			t.Fatal(err)
		}
	}
	// Replaying an old version's ciphertext into the current version fails too.
	var oldNonce, oldCT []byte
	_ = f.db.Pool.QueryRow(ctx, `SELECT nonce, ciphertext FROM environment_values WHERE environment_id = $1 AND name = 'SESSION_SECRET'`, f.env.ID).Scan(&oldNonce, &oldCT)
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", "rotated"); err != nil {
		t.Fatal(err)
	}
	_, _ = f.db.Pool.Exec(ctx, `UPDATE environment_values SET nonce = $2, ciphertext = $3 WHERE environment_id = $1 AND name = 'SESSION_SECRET'`, f.env.ID, oldNonce, oldCT)
	if _, err := f.vault.ResolveValuesForDeploy(ctx, f.env.ID); !errors.Is(err, store.ErrValueDoesNotDecrypt) {
		t.Errorf("an old version's ciphertext replayed: err %v, want ErrValueDoesNotDecrypt", err)
	}
}

func TestWrongKeyIsAStartUpError(t *testing.T) {
	key := store.GenerateKey()
	f := newValuesFixture(t, key)
	ctx := context.Background()
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "SESSION_SECRET", "x"); err != nil {
		t.Fatal(err)
	}
	_, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: store.GenerateKey()})
	if err == nil || !strings.Contains(err.Error(), "encrypted with key "+f.keys.IDs()[0]) {
		t.Errorf("wrong key: err %v, want a start-up error naming the key id", err)
	}
	// A tampered check value is caught even with the right key id.
	_, _ = f.db.Pool.Exec(ctx, `UPDATE value_keys SET check_value = set_byte(check_value, 20, get_byte(check_value, 20) # 1)`)
	_, err = store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: key})
	if err == nil || !strings.Contains(err.Error(), "does not open its check value") {
		t.Errorf("bad check value: err %v", err)
	}
	// Missing key file with values stored: error, and no new key file.
	dir := t.TempDir()
	_, err = store.OpenKeyring(ctx, f.db, store.KeyringOptions{KeyFile: filepath.Join(dir, "secret.key")})
	if err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Errorf("missing key file: err %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "secret.key")); statErr == nil {
		t.Error("a fresh key file was generated although values exist under another key")
	}
}

func TestKeyFileIsGeneratedWithMode0600(t *testing.T) {
	db := storetest.NewDB(t)
	path := filepath.Join(t.TempDir(), "data", "secret.key")
	k, err := store.OpenKeyring(context.Background(), db, store.KeyringOptions{KeyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v err %v, want 0600", fi.Mode().Perm(), err)
	}
	// A second start reads the same key.
	k2, err := store.OpenKeyring(context.Background(), db, store.KeyringOptions{KeyFile: path})
	if err != nil || k2.IDs()[0] != k.IDs()[0] {
		t.Errorf("second start: ids %v vs %v, err %v", k2.IDs(), k.IDs(), err)
	}
}

func TestRotationKeepsValuesReadableAndRetiresTheOldKey(t *testing.T) {
	oldKey, newKey := store.GenerateKey(), store.GenerateKey()
	f := newValuesFixture(t, oldKey)
	ctx := context.Background()
	want := map[string]string{}
	for i := 0; i < 150; i++ {
		name := fmt.Sprintf("V%03d", i)
		want[name] = fmt.Sprintf("value-%d-%d", i, mrand.Int())
		if _, err := f.vault.SetValue(ctx, f.actor, f.env, name, want[name]); err != nil {
			t.Fatal(err)
		}
	}
	// The serving Studio holds both keys (old active); the rotation runs
	// beside it while it keeps reading and writing.
	serving, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: oldKey + "," + newKey})
	if err != nil {
		t.Fatal(err)
	}
	servingVault := store.NewVault(f.db, serving)
	rotator, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey + "," + oldKey})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readErr error
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			got, err := servingVault.ResolveValuesForDeploy(ctx, f.env.ID)
			mu.Lock()
			if err != nil && readErr == nil {
				readErr = err
			} else if err == nil && len(got) < 150 && readErr == nil {
				readErr = fmt.Errorf("only %d values readable", len(got))
			}
			mu.Unlock()
			// Writes during rotation land under whichever key is active.
			if _, err := servingVault.SetValue(ctx, f.actor, f.env, "V000", want["V000"]); err != nil {
				mu.Lock()
				readErr = err
				mu.Unlock()
			}
		}
	}()
	res, err := store.NewVault(f.db, rotator).RotateKey(ctx, store.Actor{RequestID: "test"}, rotator.IDs()[0], nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if readErr != nil {
		t.Fatalf("during rotation: %v", readErr)
	}
	// The writer may seal V000 under the new key before the rotation
	// reaches it; then that one needs no re-encryption.
	if res.Reencrypted < 149 || res.Reencrypted > 150 || len(res.Retired) != 1 || res.Retired[0] != store.KeyID(mustKey(t, oldKey)) {
		t.Errorf("rotation = %+v", res)
	}
	// After: readable with the new key alone; the old key alone is refused.
	newOnly, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey})
	if err != nil {
		t.Fatalf("new key alone after rotation: %v", err)
	}
	got, err := store.NewVault(f.db, newOnly).ResolveValuesForDeploy(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	for n, v := range want {
		if got[n] != v {
			t.Fatalf("%s differs after rotation", n)
		}
	}
	if _, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: oldKey}); err == nil {
		t.Error("the retired key alone still opens the keyring")
	}
	var stillOld int
	_ = f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM environment_values WHERE key_id <> $1 AND ciphertext IS NOT NULL`, newOnly.IDs()[0]).Scan(&stillOld)
	if stillOld != 0 {
		t.Errorf("%d values still under the old key", stillOld)
	}
}

func mustKey(t *testing.T, s string) []byte {
	k, err := store.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRotationReSealsTheInstallationSecrets: the installation's own secrets
// (the edge's secret, the development CA's key) are sealed with the value
// keys too, so a rotation seals them again: after it the new key alone
// opens them, unchanged, and the retired key is needed for nothing.
func TestRotationReSealsTheInstallationSecrets(t *testing.T) {
	oldKey, newKey := store.GenerateKey(), store.GenerateKey()
	f := newValuesFixture(t, oldKey)
	ctx := context.Background()
	secrets := map[string][]byte{}
	for _, name := range []string{"edge-secret", "dev-ca-key"} {
		s, err := f.vault.InstallationSecret(ctx, name, func() ([]byte, error) { return []byte(name + "-" + store.GenerateKey()), nil })
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = s
	}
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "TOKEN", "tok-1"); err != nil {
		t.Fatal(err)
	}
	rotator, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey + "," + oldKey})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.NewVault(f.db, rotator).RotateKey(ctx, store.Actor{RequestID: "test"}, rotator.IDs()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Secrets != 2 || res.Reencrypted != 1 || len(res.Retired) != 1 {
		t.Errorf("rotation = %+v, want 1 value and 2 installation secrets sealed again, and the old key retired", res)
	}

	newOnly, err := store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey})
	if err != nil {
		t.Fatalf("the new key alone after the rotation: %v", err)
	}
	v := store.NewVault(f.db, newOnly)
	for name, want := range secrets {
		got, err := v.InstallationSecret(ctx, name, func() ([]byte, error) {
			return nil, fmt.Errorf("%s generated again: it should have been read", name)
		})
		if err != nil {
			t.Fatalf("installation secret %s with the new key alone: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("installation secret %s changed in the rotation", name)
		}
	}
	// Rotating again finds nothing to do.
	res, err = store.NewVault(f.db, newOnly).RotateKey(ctx, store.Actor{RequestID: "test"}, newOnly.IDs()[0], nil)
	if err != nil || res.Secrets != 0 || res.Reencrypted != 0 {
		t.Errorf("a second rotation = %+v, %v; want nothing to do", res, err)
	}
	// A keyring without the key an installation secret is sealed with is
	// refused when it is opened, not when the secret is first needed.
	if _, err := f.db.Pool.Exec(ctx, `UPDATE installation_settings SET value = $1 || substr(value, strpos(value, ':'))
		WHERE key = 'sealed:edge-secret'`, store.KeyID(mustKey(t, oldKey))); err != nil {
		t.Fatal(err)
	}
	_, err = store.OpenKeyring(ctx, f.db, store.KeyringOptions{SecretKey: newKey})
	if err == nil || !strings.Contains(err.Error(), store.KeyID(mustKey(t, oldKey))) || !strings.Contains(err.Error(), "edge-secret") ||
		strings.Contains(err.Error(), "dev-ca-key") {
		t.Errorf("a keyring without the key of an installation secret: %v, want it refused, naming that key and that secret alone", err)
	}
}
