package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/skali-dev/studio/runs/platform/archive"
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
func runVolumeAgent(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: studio volume-agent wait | archive DIR | extract DIR")
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
	}
	return fmt.Errorf("unknown volume-agent command %q", args)
}
