package main

// The test cluster plays the operators it does not run, as kwok plays the
// kubelet: CloudNativePG unless --cnpg runs the real one (a Cluster gets
// its application Secret, then Ready, and status.secretsResourceVersion
// names that Secret's version) and a bucket provisioner (an
// ObjectBucketClaim gets its Secret and ConfigMap, then Bound). A Cluster
// or claim whose name starts with "stuck" is never made ready: the Cluster
// says why in its Ready condition, the claim stays Pending (for tests of a
// provisioning that times out). No database or bucket exists behind them.
//
// On a real node it also provisions volumes: a claim of the default
// StorageClass gets a hostPath PersistentVolume, a directory under the
// node's state directory that any user may write (the kubelet applies no
// fsGroup to hostPath), removed with the volume once its claim is gone.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// stuckMessage is the played operator's condition of a "stuck" Cluster.
const stuckMessage = "instance 1 cannot start: the test cluster plays an operator that never makes this Cluster ready"

type operators struct {
	server, token string
	client        *http.Client
	// playCNPG: play CloudNativePG (false when the real one runs).
	playCNPG bool
	// volumes, when set, is where claims' hostPath volumes go.
	volumes string
}

func newOperators(server string, caPEM []byte, token string) *operators {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &operators{server: server, token: token, playCNPG: true,
		client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
}

func (o *operators) do(ctx context.Context, method, path, contentType string, body any) (map[string]any, int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.server+path, r)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out, resp.StatusCode, nil
}

// run plays the operators until ctx ends.
func (o *operators) run(ctx context.Context) {
	if o.playCNPG {
		go o.watch(ctx, "/apis/postgresql.cnpg.io/v1/clusters", o.cluster)
	}
	go o.watch(ctx, "/apis/objectbucket.io/v1alpha1/objectbucketclaims", o.claim)
	if o.volumes != "" {
		go o.watch(ctx, "/api/v1/persistentvolumeclaims", o.volumeClaim)
		go o.watch(ctx, "/api/v1/persistentvolumes", o.volume)
	}
}

// watch hands every added or changed object of the resource to act,
// opening the watch again whenever it ends.
func (o *operators) watch(ctx context.Context, path string, act func(context.Context, map[string]any)) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.server+path+"?watch=1", nil)
		req.Header.Set("Authorization", "Bearer "+o.token)
		resp, err := o.client.Do(req)
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				var ev struct {
					Type   string         `json:"type"`
					Object map[string]any `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) == nil && (ev.Type == "ADDED" || ev.Type == "MODIFIED") {
					act(ctx, ev.Object)
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func field(o map[string]any, path ...string) any {
	var v any = o
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func text(o map[string]any, path ...string) string {
	s, _ := field(o, path...).(string)
	return s
}

func ownerOf(o map[string]any) []map[string]any {
	return []map[string]any{{"apiVersion": o["apiVersion"], "kind": o["kind"], "name": text(o, "metadata", "name"),
		"uid": text(o, "metadata", "uid"), "controller": true}}
}

// ensure creates the object (namespaced path without the name) unless it
// exists, and returns its resourceVersion.
func (o *operators) ensure(ctx context.Context, path, name string, obj map[string]any) (string, error) {
	got, code, err := o.do(ctx, http.MethodPost, path, "application/json", obj)
	if err != nil {
		return "", err
	}
	if code == http.StatusConflict {
		got, code, err = o.do(ctx, http.MethodGet, path+"/"+name, "", nil)
		if err != nil {
			return "", err
		}
	}
	if code >= 300 {
		return "", fmt.Errorf("%s/%s: %d %v", path, name, code, got["message"])
	}
	return text(got, "metadata", "resourceVersion"), nil
}

func (o *operators) patchStatus(ctx context.Context, path string, status map[string]any) {
	if _, code, err := o.do(ctx, http.MethodPatch, path+"/status", "application/merge-patch+json", map[string]any{"status": status}); err != nil || code >= 300 {
		log.Printf("testcluster: playing the operator, patching %s: %d %v", path, code, err)
	}
}

func readyCondition(status, reason, message string) []map[string]any {
	return []map[string]any{{"type": "Ready", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
}

func isReady(o map[string]any) bool {
	cs, _ := field(o, "status", "conditions").([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// cluster plays CloudNativePG for one Cluster.
func (o *operators) cluster(ctx context.Context, c map[string]any) {
	ns, name := text(c, "metadata", "namespace"), text(c, "metadata", "name")
	if field(c, "metadata", "deletionTimestamp") != nil {
		return
	}
	path := "/apis/postgresql.cnpg.io/v1/namespaces/" + ns + "/clusters/" + name
	if strings.HasPrefix(name, "stuck") {
		if text(c, "status", "phase") == "" {
			o.patchStatus(ctx, path, map[string]any{"phase": "Setting up primary",
				"conditions": readyCondition("False", "ClusterIsNotReady", stuckMessage)})
		}
		return
	}
	if isReady(c) && text(c, "status", "secretsResourceVersion", "applicationSecretVersion") != "" {
		return
	}
	host := name + "-rw." + ns
	password := randomHex(12)
	rv, err := o.ensure(ctx, "/api/v1/namespaces/"+ns+"/secrets", name+"-app", map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name + "-app", "namespace": ns, "ownerReferences": ownerOf(c),
			"labels": map[string]any{"cnpg.io/cluster": name, "cnpg.io/userType": "app"}},
		"type": "kubernetes.io/basic-auth",
		"stringData": map[string]any{"username": "app", "user": "app", "password": password, "dbname": "app",
			"host": host, "port": "5432", "uri": fmt.Sprintf("postgresql://app:%s@%s:5432/app", password, host),
			"jdbc-uri": fmt.Sprintf("jdbc:postgresql://%s:5432/app?password=%s&user=app", host, password)},
	})
	if err != nil {
		log.Printf("testcluster: playing CloudNativePG: %v", err)
		return
	}
	instances := field(c, "spec", "instances")
	o.patchStatus(ctx, path, map[string]any{"phase": "Cluster in healthy state", "instances": instances, "readyInstances": instances,
		"secretsResourceVersion": map[string]any{"applicationSecretVersion": rv},
		"conditions":             readyCondition("True", "ClusterIsReady", "Cluster is Ready")})
}

// claim plays a bucket provisioner for one ObjectBucketClaim.
func (o *operators) claim(ctx context.Context, c map[string]any) {
	ns, name := text(c, "metadata", "namespace"), text(c, "metadata", "name")
	if field(c, "metadata", "deletionTimestamp") != nil {
		return
	}
	path := "/apis/objectbucket.io/v1alpha1/namespaces/" + ns + "/objectbucketclaims/" + name
	if strings.HasPrefix(name, "stuck") {
		if text(c, "status", "phase") == "" {
			o.patchStatus(ctx, path, map[string]any{"phase": "Pending"})
		}
		return
	}
	if text(c, "status", "phase") == "Bound" {
		return
	}
	bucket := text(c, "spec", "generateBucketName")
	if bucket == "" {
		bucket = text(c, "spec", "bucketName")
	}
	meta := map[string]any{"name": name, "namespace": ns, "ownerReferences": ownerOf(c)}
	if _, err := o.ensure(ctx, "/api/v1/namespaces/"+ns+"/secrets", name, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta,
		"stringData": map[string]any{"AWS_ACCESS_KEY_ID": "played-" + randomHex(8), "AWS_SECRET_ACCESS_KEY": randomHex(16)}}); err != nil {
		log.Printf("testcluster: playing the bucket provisioner: %v", err)
		return
	}
	if _, err := o.ensure(ctx, "/api/v1/namespaces/"+ns+"/configmaps", name, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
		"data": map[string]any{"BUCKET_HOST": "s3.test", "BUCKET_NAME": bucket, "BUCKET_PORT": "443", "BUCKET_REGION": "us-east-1"}}); err != nil {
		log.Printf("testcluster: playing the bucket provisioner: %v", err)
		return
	}
	o.patchStatus(ctx, path, map[string]any{"phase": "Bound"})
}

// volumeClaim provisions a hostPath volume for a pending claim of the
// played provisioner's class, bound to it by its claimRef.
func (o *operators) volumeClaim(ctx context.Context, c map[string]any) {
	if field(c, "metadata", "deletionTimestamp") != nil || text(c, "status", "phase") != "Pending" || text(c, "spec", "volumeName") != "" {
		return
	}
	if text(c, "spec", "storageClassName") != storageClass {
		return
	}
	uid := text(c, "metadata", "uid")
	name := "pvc-" + uid
	dir := filepath.Join(o.volumes, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		log.Printf("testcluster: provisioning a volume: %v", err)
		return
	}
	// Any user of the pod may write it (no fsGroup for hostPath); the
	// umask is not applied by chmod.
	if err := os.Chmod(dir, 0o777); err != nil {
		log.Printf("testcluster: provisioning a volume: %v", err)
		return
	}
	size, _ := field(c, "spec", "resources", "requests", "storage").(string)
	if _, err := o.ensure(ctx, "/api/v1/persistentvolumes", name, map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{"pv.kubernetes.io/provisioned-by": volumeProvisioner}},
		"spec": map[string]any{
			"capacity":                      map[string]any{"storage": size},
			"accessModes":                   field(c, "spec", "accessModes"),
			"volumeMode":                    field(c, "spec", "volumeMode"),
			"storageClassName":              storageClass,
			"persistentVolumeReclaimPolicy": "Delete",
			"hostPath":                      map[string]any{"path": dir, "type": "Directory"},
			"claimRef": map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
				"namespace": text(c, "metadata", "namespace"), "name": text(c, "metadata", "name"), "uid": uid},
		},
	}); err != nil {
		log.Printf("testcluster: provisioning a volume: %v", err)
	}
}

// volume deletes a played volume whose claim is gone, with its directory.
func (o *operators) volume(ctx context.Context, v map[string]any) {
	if text(v, "metadata", "annotations", "pv.kubernetes.io/provisioned-by") != volumeProvisioner {
		return
	}
	if phase := text(v, "status", "phase"); phase != "Released" && phase != "Failed" {
		return
	}
	name := text(v, "metadata", "name")
	if field(v, "metadata", "deletionTimestamp") == nil {
		if _, code, err := o.do(ctx, http.MethodDelete, "/api/v1/persistentvolumes/"+name, "", nil); err != nil || (code >= 300 && code != http.StatusNotFound) {
			log.Printf("testcluster: deleting volume %s: %d %v", name, code, err)
			return
		}
	}
	if dir := text(v, "spec", "hostPath", "path"); strings.HasPrefix(dir, o.volumes+"/") {
		_ = os.RemoveAll(dir)
	}
}
