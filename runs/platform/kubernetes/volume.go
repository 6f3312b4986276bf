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
// network use, and is deleted after each step. A bucket's snapshot is the
// archive of its objects, read by the same agent in a helper pod whose
// environment is the bucket claim's ConfigMap and Secret (its endpoint and
// keys, which the Studio itself never reads).

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

// helper is a helper pod to start: what it serves, for people and labels.
type helper struct {
	what    string // "volume photos/uploads", "bucket files"
	service string // its service's label
	app     string // the application whose resources and node it takes ("": any application's resources, any node)
	volumes []Object
	mounts  []Object
	envFrom []Object
}

// volumeHelper is the helper of app's claim of vol, mounted read-only
// unless write.
func volumeHelper(app, vol string, write bool) helper {
	return helper{what: "volume " + app + "/" + vol, service: app, app: app,
		volumes: []Object{{"name": "data", "persistentVolumeClaim": Object{"claimName": dnsName(app, vol), "readOnly": !write}}},
		mounts:  []Object{{"name": "data", "mountPath": volumeMount, "readOnly": !write}}}
}

// bucketHelper is the helper of bucket name: its claim's ConfigMap and
// Secret are its environment, so the Studio never reads the bucket's keys.
func bucketHelper(name string) helper {
	return helper{what: "bucket " + name, service: name,
		envFrom: []Object{{"configMapRef": Object{"name": dnsName(name)}}, {"secretRef": Object{"name": dnsName(name)}}}}
}

// startHelper starts a pod of the volume agent, waits until it runs and
// returns its name and how to delete it.
func (p *Platform) startHelper(ctx context.Context, n envNames, h helper) (string, func(), error) {
	// A helper of this service still there is a Studio's that was killed
	// during a step (one backup step of an environment runs at a time):
	// it goes first, so that it holds no claim and is not left behind.
	old, err := p.Client.List(ctx, KindPod, n.namespace, LabelHelper+"=backup,"+LabelService+"="+labelValue(h.service))
	if err != nil {
		return "", nil, p.apiError("listing the helper pods of "+h.what, err)
	}
	for _, o := range old {
		if err := p.Client.Delete(ctx, KindPod, n.namespace, str(o, "metadata", "name")); err != nil {
			return "", nil, p.apiError("deleting an earlier helper pod of "+h.what, err)
		}
	}
	suffix := make([]byte, 3)
	rand.Read(suffix)
	name := dnsName("skali-helper", h.service, hex.EncodeToString(suffix))
	container := Object{"name": "agent", "image": p.Opts.HelperImage, "args": []string{"volume-agent", "wait"}}
	if h.mounts != nil {
		container["volumeMounts"] = h.mounts
	}
	if h.envFrom != nil {
		container["envFrom"] = h.envFrom
	}
	spec := Object{
		"restartPolicy":         "Never",
		"activeDeadlineSeconds": 6 * 3600,
		"enableServiceLinks":    false,
		"containers":            []Object{container},
	}
	if h.volumes != nil {
		spec["volumes"] = h.volumes
	}
	hardenPod(spec)
	// Root, to read and write every file whatever its owner, with only
	// what that takes (all in the baseline Pod Security profile).
	spec["securityContext"].(Object)["runAsUser"] = 0
	spec["securityContext"].(Object)["runAsGroup"] = 0
	spec["securityContext"].(Object)["runAsNonRoot"] = false
	container["securityContext"].(Object)["capabilities"] = Object{"drop": []string{"ALL"}, "add": []string{"CHOWN", "DAC_OVERRIDE", "FOWNER"}}
	// An application's own resources (its namespace's quota has room
	// for one more of its pods), and its node while one of its pods
	// holds the claim.
	selector := LabelManagedBy + "=" + managedBy
	if h.app != "" {
		selector = LabelService + "=" + labelValue(h.app)
	}
	deps, err := p.Client.List(ctx, KindDeployment, n.namespace, selector)
	if err != nil {
		return "", nil, p.apiError("reading the Deployments of "+n.namespace, err)
	}
	for _, d := range deps {
		if cs := list(d, "spec", "template", "spec", "containers"); len(cs) > 0 {
			if c, _ := cs[0].(Object); c["resources"] != nil {
				container["resources"] = c["resources"]
				break
			}
		}
	}
	if h.app != "" {
		pods, err := p.Client.List(ctx, KindPod, n.namespace, LabelService+"="+labelValue(h.app)+","+LabelComponent+"=application")
		if err != nil {
			return "", nil, p.apiError("listing the pods of "+h.app, err)
		}
		for _, pod := range pods {
			if node := str(pod, "spec", "nodeName"); node != "" && str(pod, "metadata", "deletionTimestamp") == "" {
				spec["nodeName"] = node
				break
			}
		}
	}
	labels := p.labels(n, h.service)
	labels[LabelHelper] = "backup"
	obj := Object{"metadata": Object{"name": name, "namespace": n.namespace, "labels": labels}, "spec": spec}
	if _, err := p.Client.Create(ctx, KindPod, obj); err != nil {
		return "", nil, p.apiError("creating the helper pod of "+h.what, err)
	}
	remove := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := p.Client.Delete(dctx, KindPod, n.namespace, name); err != nil {
			p.Opts.Logger.Warn("a backup's helper pod could not be deleted", "namespace", n.namespace, "pod", name, "err", err)
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
				return "", nil, fmt.Errorf("the helper pod of %s ended before it was used: %s", h.what, podSaid(pod))
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
			return "", nil, fmt.Errorf("the helper pod of %s did not run within %s: %s", h.what, helperTimeout, said)
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

// helperFor is the helper pod and agent commands of a volume or bucket.
func helperFor(svc platform.SnapshotService) (h helper, archiveCmd, extractCmd []string, err error) {
	agent := []string{"/usr/local/bin/studio", "volume-agent"}
	if svc.Kind == "bucket" {
		return bucketHelper(svc.Name), append(agent, "bucket-archive"), append(agent, "bucket-extract"), nil
	}
	app, vol, err := volumeParts(svc)
	if err != nil {
		return helper{}, nil, nil, err
	}
	return volumeHelper(app, vol, false), append(agent, "archive", volumeMount), append(agent, "extract", volumeMount), nil
}

// snapshotArchive streams the archive of a volume's files, or a bucket's
// objects, to w.
func (p *Platform) snapshotArchive(ctx context.Context, n envNames, svc platform.SnapshotService, w io.Writer) error {
	h, cmd, _, err := helperFor(svc)
	if err != nil {
		return err
	}
	pod, remove, err := p.startHelper(ctx, n, h)
	if err != nil {
		return err
	}
	defer remove()
	var errs stderrTail
	if err := p.Client.Exec(ctx, n.namespace, pod, "agent", cmd, nil, w, &errs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reading %s in pod %s failed: %w", svc, pod, errs.said(err))
	}
	return nil
}

// restoreArchive replaces a volume's files, or a bucket's objects, with
// the snapshot's, checked as they are written: the agent fails on an
// entry that differs from the manifest, and the file itself is checked
// against its recorded SHA-256 as it streams.
func (p *Platform) restoreArchive(ctx context.Context, n envNames, svc platform.SnapshotService, loc platform.SnapshotLocation, file platform.SnapshotFile) error {
	h, _, cmd, err := helperFor(svc)
	if err != nil {
		return err
	}
	if svc.Kind == "volume" {
		app, vol, _ := volumeParts(svc)
		h = volumeHelper(app, vol, true)
	}
	pod, remove, err := p.startHelper(ctx, n, h)
	if err != nil {
		return err
	}
	defer remove()
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { pw.CloseWithError(platform.CopyVerified(ctx, loc, file, pw)) }()
	var out strings.Builder
	var errs stderrTail
	if err := p.Client.Exec(ctx, n.namespace, pod, "agent", cmd, pr, &out, &errs); err != nil {
		return fileError(errs.said(err), "writing "+svc.String()+" failed")
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
