package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/runs/platform/archive"
)

// A volume's snapshot is the archive (package archive: a tar stream with a
// manifest of each file's size and SHA-256) its files make, written by the
// Studio's volume agent in a helper pod that mounts the claim, through the
// API server's exec, streamed to the target as a database's dump is. The
// helper pod runs the Studio's own image (Options.HelperImage), on the
// node of the application's pod (the claim is ReadWriteOnce), with the
// claim read-only for a snapshot; it has no service account token and no
// network use, and is deleted after each step.

// volumeMount is where the helper pod mounts the claim.
const volumeMount = "/data"

// helperTimeout bounds the wait for a helper pod to run.
const helperTimeout = 5 * time.Minute

// LabelHelper marks the Studio's helper pods.
const LabelHelper = "skali.dev/helper"

// volumeParts splits a volume service's name, app/volume.
func volumeParts(svc platform.SnapshotService) (app, vol string, err error) {
	app, vol, ok := strings.Cut(svc.Name, "/")
	if !ok || app == "" || vol == "" {
		return "", "", fmt.Errorf("%q names no application's volume", svc.Name)
	}
	return app, vol, nil
}

// helperPod starts a pod of the volume agent with app's claim of vol
// mounted (read-only unless write), waits until it runs and returns its
// name and how to delete it.
func (p *Platform) helperPod(ctx context.Context, n envNames, app, vol string, write bool) (string, func(), error) {
	claim := dnsName(app, vol)
	suffix := make([]byte, 3)
	rand.Read(suffix)
	name := dnsName("skali-volume", claim, hex.EncodeToString(suffix))
	container := Object{
		"name": "agent", "image": p.Opts.HelperImage, "args": []string{"volume-agent", "wait"},
		"volumeMounts": []Object{{"name": "data", "mountPath": volumeMount, "readOnly": !write}},
	}
	spec := Object{
		"restartPolicy":         "Never",
		"activeDeadlineSeconds": 6 * 3600,
		"enableServiceLinks":    false,
		"containers":            []Object{container},
		"volumes":               []Object{{"name": "data", "persistentVolumeClaim": Object{"claimName": claim, "readOnly": !write}}},
	}
	hardenPod(spec)
	// Root, to read and write every file whatever its owner, with only
	// what that takes (all in the baseline Pod Security profile).
	spec["securityContext"].(Object)["runAsUser"] = 0
	spec["securityContext"].(Object)["runAsGroup"] = 0
	spec["securityContext"].(Object)["runAsNonRoot"] = false
	container["securityContext"].(Object)["capabilities"] = Object{"drop": []string{"ALL"}, "add": []string{"CHOWN", "DAC_OVERRIDE", "FOWNER"}}
	// The application's own resources (its namespace's quota has room
	// for one more of its pods), and its node while one of its pods
	// holds the claim.
	deps, err := p.Client.List(ctx, KindDeployment, n.namespace, LabelService+"="+labelValue(app))
	if err != nil {
		return "", nil, p.apiError("reading the Deployment of "+app, err)
	}
	for _, d := range deps {
		if cs := list(d, "spec", "template", "spec", "containers"); len(cs) > 0 {
			if c, _ := cs[0].(Object); c["resources"] != nil {
				container["resources"] = c["resources"]
			}
		}
	}
	pods, err := p.Client.List(ctx, KindPod, n.namespace, LabelService+"="+labelValue(app)+","+LabelComponent+"=application")
	if err != nil {
		return "", nil, p.apiError("listing the pods of "+app, err)
	}
	for _, pod := range pods {
		if node := str(pod, "spec", "nodeName"); node != "" && str(pod, "metadata", "deletionTimestamp") == "" {
			spec["nodeName"] = node
			break
		}
	}
	labels := p.labels(n, app)
	labels[LabelHelper] = "volume"
	obj := Object{"metadata": Object{"name": name, "namespace": n.namespace, "labels": labels}, "spec": spec}
	if _, err := p.Client.Create(ctx, KindPod, obj); err != nil {
		return "", nil, p.apiError("creating the helper pod of volume "+app+"/"+vol, err)
	}
	remove := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := p.Client.Delete(dctx, KindPod, n.namespace, name); err != nil {
			p.Opts.Logger.Warn("a volume's helper pod could not be deleted", "namespace", n.namespace, "pod", name, "err", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	for {
		pod, err := p.Client.Get(wctx, KindPod, n.namespace, name)
		if err == nil {
			switch str(pod, "status", "phase") {
			case "Running":
				return name, remove, nil
			case "Failed", "Succeeded":
				remove()
				return "", nil, fmt.Errorf("the helper pod of volume %s/%s ended before it was used: %s", app, vol, podSaid(pod))
			}
		}
		if err := sleepCtx(wctx, 250*time.Millisecond); err != nil {
			remove()
			if ctx.Err() != nil {
				return "", nil, ctx.Err()
			}
			said := "not found"
			if pod != nil {
				said = podSaid(pod)
			}
			return "", nil, fmt.Errorf("the helper pod of volume %s/%s did not run within %s: %s", app, vol, helperTimeout, said)
		}
	}
}

// podSaid is why a pod is not running, from its status.
func podSaid(pod Object) string {
	for _, c := range list(pod, "status", "containerStatuses") {
		cs, _ := c.(Object)
		for _, state := range []string{"waiting", "terminated"} {
			if s, ok := at(cs, "state", state).(Object); ok {
				return strings.TrimSpace(str(s, "reason") + " " + str(s, "message"))
			}
		}
	}
	for _, c := range list(pod, "status", "conditions") {
		cs, _ := c.(Object)
		if str(cs, "status") == "False" && str(cs, "message") != "" {
			return str(cs, "message")
		}
	}
	return orText(str(pod, "status", "phase"), "no status yet")
}

// snapshotVolume streams the archive of a volume's files to w.
func (p *Platform) snapshotVolume(ctx context.Context, n envNames, svc platform.SnapshotService, w io.Writer) error {
	app, vol, err := volumeParts(svc)
	if err != nil {
		return err
	}
	pod, remove, err := p.helperPod(ctx, n, app, vol, false)
	if err != nil {
		return err
	}
	defer remove()
	var errs stderrTail
	if err := p.Client.Exec(ctx, n.namespace, pod, "agent", []string{"/usr/local/bin/studio", "volume-agent", "archive", volumeMount}, nil, w, &errs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reading volume %s in pod %s failed: %w", svc.Name, pod, errs.said(err))
	}
	return nil
}

// restoreVolume replaces a volume's files with the snapshot's, checked
// as they are written: the agent fails on a file that differs from the
// manifest, and the file itself is checked against its recorded SHA-256
// as it streams.
func (p *Platform) restoreVolume(ctx context.Context, n envNames, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	app, vol, err := volumeParts(svc)
	if err != nil {
		return err
	}
	pod, remove, err := p.helperPod(ctx, n, app, vol, true)
	if err != nil {
		return err
	}
	defer remove()
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { pw.CloseWithError(platform.CopyVerified(ctx, loc, file, pw)) }()
	var out strings.Builder
	var errs stderrTail
	if err := p.Client.Exec(ctx, n.namespace, pod, "agent", []string{"/usr/local/bin/studio", "volume-agent", "extract", volumeMount}, pr, &out, &errs); err != nil {
		return fileError(errs.said(err), "writing volume "+svc.Name+" failed")
	}
	return nil
}

// scratchArchive extracts a volume's (or bucket's) archive into the
// drill's scratch directory, checking each file against the manifest and
// the whole file against its recorded SHA-256.
func scratchArchive(ctx context.Context, loc platform.SnapshotLocation, file platform.SnapshotFile, scratch string) (platform.ScratchCheck, error) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { pw.CloseWithError(platform.CopyVerified(ctx, loc, file, pw)) }()
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return platform.ScratchCheck{}, err
	}
	sum, err := archive.Extract(pr, scratch, true)
	if err != nil {
		var fe *platform.SnapshotFileError
		if errors.As(err, &fe) || errors.Is(err, context.Canceled) {
			return platform.ScratchCheck{}, err
		}
		return platform.ScratchCheck{}, &platform.SnapshotFileError{File: file.File, Problem: "does not restore: " + err.Error()}
	}
	return platform.ScratchCheck{Objects: sum.Files, Bytes: sum.Bytes}, nil
}
