package runs

import (
	"context"
	"errors"
	"strings"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/store"
)

// BackupTargetForm is the installation page's backup target form: a
// directory, or an s3:// URL with how to reach it and its key pair. An
// empty AccessKey or SecretKey keeps the one stored for the current S3
// target (the form never shows them again).
type BackupTargetForm struct {
	Target    string
	Endpoint  string
	Region    string
	PathStyle bool
	AccessKey string
	SecretKey string
}

// SetBackupTarget checks the directory target with the platform and
// stores it.
func (s *Service) SetBackupTarget(ctx context.Context, a store.Actor, target string) error {
	return s.SaveBackupTarget(ctx, a, BackupTargetForm{Target: target})
}

// SaveBackupTarget checks the target for real (a directory: exists,
// writable; S3: a test object written, read back and deleted) and that it
// is not another installation's, writes this installation's marker in it
// and stores it. Nothing is stored when a check fails: the old target
// stays.
func (s *Service) SaveBackupTarget(ctx context.Context, a store.Actor, f BackupTargetForm) error {
	f.Target = strings.TrimSpace(f.Target)
	if f.Target == "" {
		return &BackupRefusal{Field: "target", Message: "Write the directory snapshots are written to, such as /var/backups/skali, or an s3://BUCKET/PREFIX URL."}
	}
	inst, err := installationID(ctx, s.DB)
	if err != nil {
		return err
	}
	if _, err := platform.Backups(s.Platform); err != nil {
		return &BackupRefusal{Field: "target", Message: err.Error()}
	}
	if !strings.HasPrefix(f.Target, "s3://") {
		t, err := directoryTarget(s.Platform, f.Target)
		if err != nil {
			return &BackupRefusal{Field: "target", Message: err.Error()}
		}
		if err := t.Mark(ctx, inst); err != nil {
			return &BackupRefusal{Field: "target", Message: err.Error()}
		}
		return s.DB.SetBackupTarget(ctx, a, f.Target)
	}
	if s.Vault == nil {
		return &BackupRefusal{Field: "target", Message: "An S3 target's keys are sealed with the value-encryption key, which this Studio is not configured with."}
	}
	if _, _, err := s3target.ParseURL(f.Target); err != nil {
		return &BackupRefusal{Field: "target", Message: err.Error()}
	}
	settings := store.S3Settings{Endpoint: strings.TrimSuffix(strings.TrimSpace(f.Endpoint), "/"), Region: strings.TrimSpace(f.Region), PathStyle: f.PathStyle}
	if settings.Endpoint == "" {
		return &BackupRefusal{Field: "endpoint", Message: "Write the endpoint of the S3-compatible storage, such as https://s3.eu-central-1.amazonaws.com."}
	}
	if settings.Region == "" {
		settings.Region = "us-east-1"
	}
	creds := store.S3Credentials{AccessKey: strings.TrimSpace(f.AccessKey), SecretKey: f.SecretKey}
	if creds.AccessKey == "" || creds.SecretKey == "" {
		// Kept from the current S3 target: the form shows them as set.
		_, stored, ok, err := s.Vault.S3BackupTarget(ctx)
		if err != nil {
			return err
		}
		if ok && creds.AccessKey == "" {
			creds.AccessKey = stored.AccessKey
		}
		if ok && creds.SecretKey == "" {
			creds.SecretKey = stored.SecretKey
		}
	}
	if creds.AccessKey == "" {
		return &BackupRefusal{Field: "access_key", Message: "Write the access key the Studio signs its requests with."}
	}
	if creds.SecretKey == "" {
		return &BackupRefusal{Field: "secret_key", Message: "Write the secret key of this access key."}
	}
	if len(creds.AccessKey) > 256 || len(creds.SecretKey) > 256 || len(settings.Endpoint) > 512 || len(settings.Region) > 64 {
		return &BackupRefusal{Field: "target", Message: "An endpoint, region or key this long is not one."}
	}
	t, err := s3target.New(s3target.Config{URL: f.Target, Endpoint: settings.Endpoint, Region: settings.Region, PathStyle: settings.PathStyle,
		AccessKey: creds.AccessKey, SecretKey: creds.SecretKey})
	if err != nil {
		return &BackupRefusal{Field: "endpoint", Message: err.Error()}
	}
	defer t.Client().Close()
	if err := t.Mark(ctx, inst); err != nil {
		return &BackupRefusal{Field: s3target.FieldOf(err), Message: err.Error()}
	}
	return s.Vault.SetS3BackupTarget(ctx, a, t.String(), settings, creds)
}

// directoryTarget is path as a target on platform p, or why p cannot
// write snapshots to a directory.
func directoryTarget(p platform.Platform, path string) (platform.Target, error) {
	dt, ok := platform.As[platform.DirectoryTargets](p)
	if !ok {
		return nil, errors.New("This platform writes snapshots to S3-compatible storage only: write an s3://BUCKET/PREFIX URL with its endpoint and keys.")
	}
	return dt.DirectoryTarget(path)
}

// openTarget is the stored target as a platform.Target. An S3 target is
// opened with the credentials stored for the installation's current
// target: snapshots on an S3 target that has since been replaced cannot be
// reached (their target reads as gone).
func (r *Runner) openTarget(ctx context.Context, target string) (platform.Target, error) {
	gone := func(problem string) error {
		return &platform.TargetError{Target: target, Problem: problem, Gone: true}
	}
	if !strings.HasPrefix(target, "s3://") {
		t, err := directoryTarget(r.Platform, target)
		if err != nil {
			return nil, gone("is a directory, which this platform cannot read or write")
		}
		return t, nil
	}
	if r.Vault == nil {
		return nil, gone("cannot be opened: its keys are sealed with the value-encryption key, which this Studio is not configured with")
	}
	current, err := r.DB.BackupTarget(ctx)
	if err != nil {
		return nil, err
	}
	settings, creds, ok, err := r.Vault.S3BackupTarget(ctx)
	if err != nil {
		return nil, err
	}
	if !ok || current != target {
		return nil, gone("is no longer the installation's backup target: the Studio keeps the keys of its current target only")
	}
	t, err := s3target.New(s3target.Config{URL: target, Endpoint: settings.Endpoint, Region: settings.Region, PathStyle: settings.PathStyle,
		AccessKey: creds.AccessKey, SecretKey: creds.SecretKey, PartSize: r.S3PartSize})
	if err != nil {
		return nil, gone("cannot be opened: " + err.Error())
	}
	return t, nil
}

// location is where backup b's files live: <project>/<environment>/<snapshot>
// under its target.
func (r *Runner) location(ctx context.Context, b *store.Backup, env *store.Environment) (platform.SnapshotLocation, error) {
	inst, err := installationID(ctx, r.DB)
	if err != nil {
		return platform.SnapshotLocation{}, err
	}
	t, err := r.openTarget(ctx, b.Target)
	if err != nil {
		return platform.SnapshotLocation{}, err
	}
	return platform.SnapshotLocation{Target: t, Installation: inst, Dir: snapshotDir(b, env)}, nil
}
