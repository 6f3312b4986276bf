// Package s3target is the S3-compatible backup target: snapshots written
// under s3://BUCKET/PREFIX at an endpoint, through a small SigV4 client on
// net/http (client.go). It implements platform.Target beside the local
// platform's directory target, so any platform writes its snapshots here.
//
// Layout under the prefix (nothing is ever written outside it):
//
//	PREFIX/.skali-backup-target                    the installation's marker
//	PREFIX/PROJECT/ENVIRONMENT/SNAPSHOT/FILE       one object per database, bucket and volume
//
// An object is visible only once it is complete: a small file is one PUT,
// a larger one a multipart upload completed by its last part; an upload
// abandoned (a failure, a cancel) is aborted, and Remove aborts any left
// under a snapshot by a Studio that stopped mid-upload. Which snapshots
// are complete is recorded in the Studio's database (a backup run that
// succeeded, each object's size and SHA-256 in its checkpoints), never
// inferred from a listing.
package s3target

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
)

// Marker is the object, directly under the prefix, naming the installation
// whose target it is (the same name and text as a directory target's
// marker file).
const Marker = platform.TargetMarker

// DefaultPartSize is the size of a multipart upload's parts: the memory a
// snapshot file being written holds, whatever its size (S3 allows 10,000
// parts: files up to 160 GiB).
const DefaultPartSize = 16 << 20

// Config is an S3 target and how to reach it.
type Config struct {
	// URL is s3://BUCKET/PREFIX (the prefix may be empty).
	URL       string
	Endpoint  string
	Region    string
	PathStyle bool
	AccessKey string
	SecretKey string
	// PartSize overrides DefaultPartSize (at least 5 MiB, S3's minimum).
	PartSize int
}

// ParseURL splits s3://BUCKET/PREFIX, refusing what is not one: its
// sentences are for the installation admin.
func ParseURL(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", errors.New("Write the target as s3://BUCKET/PREFIX.")
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if strings.ContainsAny(bucket, "@:") {
		return "", "", errors.New("Write the target as s3://BUCKET/PREFIX, without credentials: the access key and secret key have fields of their own.")
	}
	if !validBucket(bucket) {
		return "", "", errors.New("The bucket's name must be 3 to 63 lowercase letters, digits, dots and hyphens, such as s3://skali-backups/studio.")
	}
	if prefix != "" && (!fs.ValidPath(prefix) || strings.ContainsAny(prefix, "\\?#") || len(prefix) > 512) {
		return "", "", errors.New("The prefix must be a plain path of folders, such as s3://skali-backups/studio (no empty, . or .. parts).")
	}
	return bucket, prefix, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return b[0] != '.' && b[0] != '-' && b[len(b)-1] != '.' && b[len(b)-1] != '-'
}

// Target is an S3 prefix as a platform.Target.
type Target struct {
	url      string
	bucket   string
	prefix   string
	endpoint string
	region   string
	partSize int
	c        *Client
}

// New returns the target of cfg (nothing is sent yet).
func New(cfg Config) (*Target, error) {
	bucket, prefix, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Endpoint == "" {
		return nil, errors.New("Write the endpoint of the S3-compatible storage, such as https://s3.eu-central-1.amazonaws.com.")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("Write the access key and the secret key the Studio signs its requests with.")
	}
	c, err := NewClient(cfg.Endpoint, cfg.Region, bucket, cfg.PathStyle, cfg.AccessKey, cfg.SecretKey)
	if err != nil {
		return nil, errors.New("The endpoint must be a URL such as https://s3.example.com: a scheme (https or http) and a host, no path.")
	}
	ps := cfg.PartSize
	if ps <= 0 {
		ps = DefaultPartSize
	}
	ps = max(ps, 5<<20)
	return &Target{url: "s3://" + bucket + "/" + prefix, bucket: bucket, prefix: prefix, endpoint: strings.TrimSuffix(cfg.Endpoint, "/"),
		region: cfg.Region, partSize: ps, c: c}, nil
}

// Client is the target's S3 client (for tests and tools).
func (t *Target) Client() *Client { return t.c }

// String implements platform.Target: the URL, no credential.
func (t *Target) String() string { return strings.TrimSuffix(t.url, "/") }

// key is name (slash separated, relative) under the prefix.
func (t *Target) key(name string) string {
	if t.prefix == "" {
		return name
	}
	return t.prefix + "/" + name
}

// snapshotKey is a snapshot file's key, refusing a dir or name that would
// leave the prefix.
func (t *Target) snapshotKey(dir, name string) (string, error) {
	if !fs.ValidPath(dir) || dir == "." || (name != "" && (!fs.ValidPath(name) || strings.Contains(name, "/"))) {
		return "", fmt.Errorf("runs: bad snapshot path %q %q", dir, name)
	}
	if name == "" {
		return t.key(dir) + "/", nil
	}
	return t.key(path.Join(dir, name)), nil
}

// Explain turns a request's error into a sentence for the installation
// admin saving the target (what the storage said, and what to do).
func (t *Target) Explain(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return "The storage cannot be used: " + err.Error() + "."
	}
	if e.Err != nil {
		return fmt.Sprintf("The endpoint %s cannot be reached (%s). Check its address and port, and that the Studio's machine may connect to it.", t.endpoint, e.Err)
	}
	switch e.Code {
	case "SignatureDoesNotMatch":
		return "The storage refused the requests' signature (SignatureDoesNotMatch): the secret key is wrong for this access key. Write the secret key again."
	case "InvalidAccessKeyId", "XAdminUserNotFound":
		return "The storage does not know this access key (" + e.Code + "). Check the access key."
	case "NoSuchBucket":
		return fmt.Sprintf("The bucket %s does not exist at %s (NoSuchBucket). Create it first, or check its name and the endpoint.", t.bucket, t.endpoint)
	case "AccessDenied", "AllAccessDisabled":
		return fmt.Sprintf("The storage refused to let these credentials write, read and delete objects under %s (%s). Grant them s3:PutObject, s3:GetObject, s3:DeleteObject and s3:ListBucket on the prefix.", t.String(), e.Code)
	case "AuthorizationHeaderMalformed", "PermanentRedirect", "IncorrectEndpoint":
		return fmt.Sprintf("The bucket %s is not in region %s at this endpoint (%s). Check the region and the endpoint.", t.bucket, t.region, e.Code)
	case "RequestTimeTooSkewed":
		return "The storage refused the requests' time (RequestTimeTooSkewed): the clock of the Studio's machine is off. Set it right."
	}
	return fmt.Sprintf("The storage refused the check (%s, HTTP %d).", e.Code, e.Status)
}

// CheckError is a save's check that failed: the sentence, and the form
// field it concerns (target, endpoint, access_key, secret_key).
type CheckError struct {
	Field   string
	Message string
}

func (e *CheckError) Error() string { return e.Message }

// FieldOf is the form field a Mark error concerns ("target" by default).
func FieldOf(err error) string {
	var ce *CheckError
	if errors.As(err, &ce) && ce.Field != "" {
		return ce.Field
	}
	return "target"
}

// refusal is a request's error as a CheckError.
func (t *Target) refusal(err error) error {
	field := "target"
	var e *Error
	switch {
	case errors.As(err, &e) && e.Err != nil:
		field = "endpoint"
	case ErrorCode(err) == "SignatureDoesNotMatch":
		field = "secret_key"
	case ErrorCode(err) == "InvalidAccessKeyId" || ErrorCode(err) == "XAdminUserNotFound":
		field = "access_key"
	case ErrorCode(err) == "AuthorizationHeaderMalformed" || ErrorCode(err) == "PermanentRedirect" || ErrorCode(err) == "IncorrectEndpoint":
		field = "region"
	}
	return &CheckError{Field: field, Message: t.Explain(err)}
}

// Mark implements platform.Target: write a test object, read it back and
// delete it; refuse a prefix whose marker names another installation;
// write installation's marker.
func (t *Target) Mark(ctx context.Context, installation string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	check := t.key(".skali-write-check-" + rand.Text())
	want := []byte("skali backup target check " + rand.Text() + "\n")
	if err := t.c.Put(ctx, check, want); err != nil {
		return t.refusal(err)
	}
	got, err := t.readSmall(ctx, check)
	derr := t.c.Delete(ctx, check)
	if err != nil {
		return t.refusal(err)
	}
	if !bytes.Equal(got, want) {
		return errors.New("The storage returned something else than the Studio wrote in its test object. It cannot hold backups.")
	}
	if derr != nil {
		return t.refusal(derr)
	}
	text, err := t.readSmall(ctx, t.key(Marker))
	switch {
	case err == nil:
		owner, err := platform.MarkerOwner(text)
		if err != nil {
			return fmt.Errorf("This prefix's %s object cannot be read: %s.", Marker, err)
		}
		if owner == installation {
			return nil
		}
		return fmt.Errorf("This prefix holds the backups of another Skali installation (its %s object names installation %s). Choose another prefix; if that installation is gone for good, delete the object first.", Marker, owner)
	case !IsNotFound(err):
		return t.refusal(err)
	}
	if err := t.c.Put(ctx, t.key(Marker), []byte(platform.MarkerText(installation))); err != nil {
		return t.refusal(err)
	}
	return nil
}

// readSmall reads a small object whole (at most 64 KiB).
func (t *Target) readSmall(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := t.c.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 64<<10))
}

// problem is a TargetError for what a request answered.
func (t *Target) problem(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Err != nil {
		return &platform.TargetError{Target: t.String(), Problem: fmt.Sprintf("cannot be reached at %s (%s)", t.endpoint, e.Err), Gone: true}
	}
	switch c := ErrorCode(err); c {
	case "NoSuchBucket":
		return &platform.TargetError{Target: t.String(), Problem: "has no bucket " + t.bucket + " any more (NoSuchBucket)", Gone: true}
	case "SignatureDoesNotMatch", "InvalidAccessKeyId", "XAdminUserNotFound", "AccessDenied", "AllAccessDisabled":
		return &platform.TargetError{Target: t.String(), Problem: "refuses the Studio's credentials (" + c + "); an installation admin must set them again", Gone: true}
	case "":
		return &platform.TargetError{Target: t.String(), Problem: "cannot be used: " + err.Error(), Gone: true}
	default:
		return &platform.TargetError{Target: t.String(), Problem: fmt.Sprintf("answered %s", c), Gone: true}
	}
}

// Check implements platform.Target: the marker must be there and name
// installation; write also writes and deletes a test object.
func (t *Target) Check(ctx context.Context, installation string, write bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	text, err := t.readSmall(ctx, t.key(Marker))
	switch {
	case IsNotFound(err):
		return &platform.TargetError{Target: t.String(), Problem: "has no " + Marker + " object under its prefix: it was deleted, or the target was never saved by this Studio (set it again on the installation page)", Gone: true}
	case err != nil:
		return t.problem(err)
	}
	owner, err := platform.MarkerOwner(text)
	if err != nil {
		return &platform.TargetError{Target: t.String(), Problem: "has a " + Marker + " object that cannot be read", Gone: true}
	}
	if owner != installation {
		return &platform.TargetError{Target: t.String(), Problem: "is marked as another Skali installation's (its " + Marker + " object names installation " + owner + ")", Gone: true}
	}
	if write {
		check := t.key(".skali-write-check-" + rand.Text())
		if err := t.c.Put(ctx, check, []byte("skali backup target check\n")); err != nil {
			return &platform.TargetError{Target: t.String(), Problem: "cannot be written: " + ErrorCode(err)}
		}
		if err := t.c.Delete(ctx, check); err != nil {
			return &platform.TargetError{Target: t.String(), Problem: "cannot be written: " + ErrorCode(err)}
		}
	}
	return nil
}

// Create implements platform.Target: the file is streamed in parts of
// partSize (one PUT when it is smaller).
func (t *Target) Create(ctx context.Context, installation, dir, name string) (platform.TargetWriter, error) {
	key, err := t.snapshotKey(dir, name)
	if err != nil {
		return nil, err
	}
	if err := t.Check(ctx, installation, false); err != nil {
		return nil, err
	}
	// An upload of this very file left by a Studio that stopped mid-way.
	if ups, err := t.c.ListMultipart(ctx, key); err == nil {
		for _, u := range ups {
			if u.Key == key {
				_ = t.c.AbortMultipart(ctx, u.Key, u.UploadID)
			}
		}
	}
	return &writer{t: t, ctx: ctx, key: key, name: name, sum: platform.NewSummer(), buf: make([]byte, 0, t.partSize)}, nil
}

// writer streams one object: a buffer of one part, uploaded when full
// while the next part fills a second buffer (one part in flight at a time,
// so memory is two parts whatever the object's size, and reading what is
// snapshotted overlaps sending it).
type writer struct {
	t        *Target
	ctx      context.Context
	key      string
	name     string
	sum      *platform.Summer
	buf      []byte
	spare    []byte // the buffer of the part last sent, once it is done
	inflight chan sentPart
	uploadID string
	parts    []Part
	done     bool
	err      error
}

// partTimeout bounds one part's upload, which a cancelled snapshot waits
// for before it aborts its upload.
const partTimeout = 5 * time.Minute

// sentPart is the outcome of one part's upload, with its buffer back.
type sentPart struct {
	part Part
	err  error
	buf  []byte
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("s3target: write after commit")
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		w.sum.Write(p[:k])
		p = p[k:]
		n += k
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				w.err = err
				return n, err
			}
		}
	}
	return n, nil
}

// flush starts uploading the buffer as the next part, once the part
// before it is done, and goes on in the other buffer.
func (w *writer) flush() error {
	if w.uploadID == "" {
		id, err := w.t.c.CreateMultipart(w.ctx, w.key)
		if err != nil {
			return w.fail(err)
		}
		w.uploadID = id
	}
	if err := w.wait(); err != nil {
		return err
	}
	buf, num, sent := w.buf, len(w.parts)+1, make(chan sentPart, 1)
	go func() {
		// The part is sent to its answer even when the snapshot is
		// cancelled meanwhile: a server that has the part's body stores it
		// after the client hangs up, and a part stored after Abort lists
		// the upload again (an incomplete upload nobody aborts). So a
		// cancel waits for at most the one part in flight, within
		// partTimeout.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), partTimeout)
		defer cancel()
		part, err := w.t.c.UploadPart(ctx, w.key, w.uploadID, num, buf)
		sent <- sentPart{part, err, buf}
	}()
	w.inflight = sent
	if w.spare == nil {
		w.spare = make([]byte, 0, cap(buf))
	}
	w.buf, w.spare = w.spare[:0], nil
	return nil
}

// wait waits for the part in flight, if any.
func (w *writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	r := <-w.inflight
	w.inflight, w.spare = nil, r.buf[:0]
	if r.err != nil {
		return w.fail(r.err)
	}
	w.parts = append(w.parts, r.part)
	return nil
}

// fail is a request's error as the snapshot's reason.
func (w *writer) fail(err error) error {
	if w.ctx.Err() != nil {
		return w.ctx.Err()
	}
	return fmt.Errorf("the backup target %s refused %s: %s", w.t.String(), w.name, shortError(err))
}

func shortError(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Err != nil {
			return e.Err.Error()
		}
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return err.Error()
}

func (w *writer) Commit() (platform.SnapshotFile, error) {
	if w.err != nil {
		w.Abort()
		return platform.SnapshotFile{}, w.err
	}
	if w.done {
		return platform.SnapshotFile{}, errors.New("s3target: committed twice")
	}
	var err error
	if w.uploadID == "" {
		if err = w.t.c.Put(w.ctx, w.key, w.buf); err != nil {
			err = w.fail(err)
		}
	} else {
		if len(w.buf) > 0 {
			err = w.flush()
		}
		if err == nil {
			err = w.wait()
		}
		if err == nil {
			if cerr := w.t.c.CompleteMultipart(w.ctx, w.key, w.uploadID, w.parts); cerr != nil {
				err = w.fail(cerr)
			}
		}
	}
	if err != nil {
		w.err = err
		w.Abort()
		return platform.SnapshotFile{}, err
	}
	w.done = true
	w.buf, w.spare = nil, nil
	return w.sum.File(w.name), nil
}

// Abort implements platform.TargetWriter: an upload begun is aborted,
// even when the snapshot's context has ended.
func (w *writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.buf = nil
	w.wait() // no part may land after the abort
	w.spare = nil
	if w.uploadID != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
		defer cancel()
		_ = w.t.c.AbortMultipart(ctx, w.key, w.uploadID)
	}
}

// notFound wraps fs.ErrNotExist for a missing object.
func (t *Target) fileError(err error) error {
	if IsNotFound(err) {
		return fmt.Errorf("%w", fs.ErrNotExist)
	}
	if ErrorCode(err) == "" || ErrorCode(err) == "NoSuchBucket" || ErrorCode(err) == "AccessDenied" ||
		ErrorCode(err) == "SignatureDoesNotMatch" || ErrorCode(err) == "InvalidAccessKeyId" || ErrorCode(err) == "XAdminUserNotFound" {
		return t.problem(err)
	}
	return errors.New(shortError(err))
}

// Size implements platform.Target.
func (t *Target) Size(ctx context.Context, installation, dir, name string) (int64, error) {
	key, err := t.snapshotKey(dir, name)
	if err != nil {
		return 0, err
	}
	n, err := t.c.Head(ctx, key)
	if err != nil {
		return 0, t.fileError(err)
	}
	return n, nil
}

// Open implements platform.Target.
func (t *Target) Open(ctx context.Context, installation, dir, name string) (io.ReadCloser, error) {
	key, err := t.snapshotKey(dir, name)
	if err != nil {
		return nil, err
	}
	rc, _, err := t.c.Get(ctx, key)
	if err != nil {
		return nil, t.fileError(err)
	}
	return rc, nil
}

// Remove implements platform.Target: every object under the snapshot's
// folder, and every upload into it that never completed.
func (t *Target) Remove(ctx context.Context, installation, dir string) error {
	prefix, err := t.snapshotKey(dir, "")
	if err != nil {
		return err
	}
	if err := t.Check(ctx, installation, false); err != nil {
		return err
	}
	objs, err := t.c.List(ctx, prefix, 0)
	if err != nil {
		return errors.New(shortError(err))
	}
	for _, o := range objs {
		if err := t.c.Delete(ctx, o.Key); err != nil {
			return errors.New(shortError(err))
		}
	}
	ups, err := t.c.ListMultipart(ctx, prefix)
	if c := ErrorCode(err); c == "AccessDenied" || c == "NotImplemented" {
		ups, err = nil, nil // keys that may not list uploads: the objects are gone
	}
	if err != nil {
		return errors.New(shortError(err))
	}
	for _, u := range ups {
		if err := t.c.AbortMultipart(ctx, u.Key, u.UploadID); err != nil {
			return errors.New(shortError(err))
		}
	}
	return nil
}

// Sizes implements platform.TargetLister: one listing of dir's prefix.
func (t *Target) Sizes(ctx context.Context, installation, dir string) (map[string]int64, error) {
	prefix, err := t.snapshotKey(dir, "")
	if err != nil {
		return nil, err
	}
	objs, err := t.c.List(ctx, prefix, 100000)
	if err != nil {
		return nil, t.fileError(err)
	}
	out := make(map[string]int64, len(objs))
	for _, o := range objs {
		out[strings.TrimPrefix(o.Key, prefix)] = o.Size
	}
	return out, nil
}

// Endpoint is the endpoint's URL as configured (for pages).
func (t *Target) Endpoint() string { return t.endpoint }

var (
	_ platform.Target       = (*Target)(nil)
	_ platform.TargetLister = (*Target)(nil)
)
