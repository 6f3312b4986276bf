package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/skali-dev/studio/runs/platform/archive"
	"github.com/skali-dev/studio/runs/platform/s3target"
)

// volumeAgentLimit is how long the helper pod of a volume's snapshot or
// restore waits, at most, for the Studio's commands.
const volumeAgentLimit = 6 * time.Hour

// runVolumeAgent is what the Studio runs in the helper pod it mounts a
// volume claim in, for backups on Kubernetes (not for people):
//
//	studio volume-agent wait          keep the pod running until stopped
//	studio volume-agent archive DIR   write DIR's files to stdout (package archive)
//	studio volume-agent extract DIR   replace DIR's files with the archive on stdin
//	studio volume-agent bucket-archive / bucket-extract
//	                                  the same for the objects of the bucket
//	                                  the environment names (BUCKET_HOST,
//	                                  BUCKET_PORT, BUCKET_NAME, BUCKET_REGION,
//	                                  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY:
//	                                  an ObjectBucketClaim's ConfigMap and Secret)
func runVolumeAgent(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: studio volume-agent wait | archive DIR | extract DIR | bucket-archive | bucket-extract (run by the Studio in its helper pods)")
	}
	switch {
	case args[0] == "wait" && len(args) == 1:
		select {
		case <-ctx.Done():
		case <-time.After(volumeAgentLimit):
		}
		return nil
	case args[0] == "archive" && len(args) == 2:
		_, err := archive.WriteDir(stdout, args[1])
		return err
	case args[0] == "extract" && len(args) == 2:
		sum, err := archive.Extract(stdin, args[1], true)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%d files, %d bytes\n", sum.Files, sum.Bytes)
		return err
	case args[0] == "bucket-archive" && len(args) == 1:
		return archiveBucket(ctx, stdout)
	case args[0] == "bucket-extract" && len(args) == 1:
		sum, err := extractBucket(ctx, stdin)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%d objects, %d bytes\n", sum.Files, sum.Bytes)
		return err
	}
	return fmt.Errorf("unknown volume-agent command %q", args)
}

// bucketClient is the S3 client of the bucket the environment names.
func bucketClient() (*s3target.Client, error) {
	host, port, name := os.Getenv("BUCKET_HOST"), os.Getenv("BUCKET_PORT"), os.Getenv("BUCKET_NAME")
	if host == "" || name == "" {
		return nil, errors.New("BUCKET_HOST and BUCKET_NAME are not set: no bucket to read")
	}
	scheme := "http"
	if port == "443" {
		scheme = "https"
	}
	endpoint := scheme + "://" + host
	if port != "" && port != "80" && port != "443" {
		endpoint = scheme + "://" + net.JoinHostPort(host, port)
	}
	region := os.Getenv("BUCKET_REGION")
	if region == "" {
		region = "us-east-1"
	}
	return s3target.NewClient(endpoint, region, name, true, os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"))
}

// archiveBucket writes every object of the bucket to w, in key order.
func archiveBucket(ctx context.Context, w io.Writer) error {
	c, err := bucketClient()
	if err != nil {
		return err
	}
	objs, err := c.List(ctx, "", 0)
	if err != nil {
		return err
	}
	a := archive.NewWriter(w)
	for i, o := range objs {
		rc, n, err := c.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		err = a.Object(i, o.Key, n, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	_, err = a.Close()
	return err
}

// extractBucket makes the bucket hold exactly the archive's objects: each
// written (in parts when large), then, once every one matched the
// manifest, the objects the archive does not hold deleted.
func extractBucket(ctx context.Context, r io.Reader) (archive.Summary, error) {
	c, err := bucketClient()
	if err != nil {
		return archive.Summary{}, err
	}
	keep := map[string]bool{}
	sum, err := archive.Read(r, func(e archive.Entry) error {
		key, ok := e.Header.PAXRecords[archive.KeyRecord]
		if !ok || e.Body == nil {
			return fmt.Errorf("entry %s of the archive names no object", e.Header.Name)
		}
		keep[key] = true
		return putObject(ctx, c, key, e.Body, e.Header.Size)
	})
	if err != nil {
		return sum, err
	}
	objs, err := c.List(ctx, "", 0)
	if err != nil {
		return sum, err
	}
	for _, o := range objs {
		if !keep[o.Key] {
			if err := c.Delete(ctx, o.Key); err != nil {
				return sum, err
			}
		}
	}
	return sum, nil
}

// putObject uploads size bytes of r as key: at once when small, else in
// parts, with memory bounded by one part.
func putObject(ctx context.Context, c *s3target.Client, key string, r io.Reader, size int64) error {
	if size <= s3target.DefaultPartSize {
		data, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return err
		}
		return c.Put(ctx, key, data)
	}
	id, err := c.CreateMultipart(ctx, key)
	if err != nil {
		return err
	}
	var parts []s3target.Part
	buf := make([]byte, s3target.DefaultPartSize)
	for n := 1; ; n++ {
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			p, err := c.UploadPart(ctx, key, id, n, buf[:k])
			if err != nil {
				c.AbortMultipart(context.WithoutCancel(ctx), key, id)
				return err
			}
			parts = append(parts, p)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			c.AbortMultipart(context.WithoutCancel(ctx), key, id)
			return rerr
		}
	}
	return c.CompleteMultipart(ctx, key, id, parts)
}
