package clustertest

// The real-node cluster is shared by the test binaries of a machine (see
// testcluster's shared.go for the protocol): the first that needs it starts
// it with --shared, the others join it, and it stops once none has used it
// for a few seconds. Binaries run their real-pod tests at the same time
// instead of queueing on the machine's lock, a cluster start each.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SharedDir holds the locks and the note of the running shared cluster.
const SharedDir = "/run/lock/skali-testcluster-shared"

// users is this process's shared lock on SharedDir/users.lock, held until
// the process ends (kept here so that it is never collected and closed).
var users *os.File

// sharedNote is what SharedDir/cluster says: the cluster's directory,
// its testcluster process and whether it is ready.
type sharedNote struct {
	dir   string
	pid   int
	ready bool
}

func readNote() (sharedNote, bool) {
	b, err := os.ReadFile(filepath.Join(SharedDir, "cluster"))
	if err != nil {
		return sharedNote{}, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return sharedNote{}, false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return sharedNote{}, false // its process is gone
	}
	return sharedNote{dir: f[0], pid: pid, ready: len(f) < 3}, true
}

// joinShared joins the machine's shared cluster, or starts it (the
// testcluster built in dir by build) when none runs.
func joinShared(prog, src, bin, dir string, args []string) (*Cluster, error) {
	if err := os.MkdirAll(SharedDir, 0o755); err != nil {
		return nil, err
	}
	join, err := os.OpenFile(filepath.Join(SharedDir, "join.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer join.Close()
	users, err = os.OpenFile(filepath.Join(SharedDir, "users.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(45 * time.Minute)
	for time.Now().Before(deadline) {
		if err := syscall.Flock(int(join.Fd()), syscall.LOCK_EX); err != nil {
			return nil, err
		}
		note, ok := readNote()
		var started *exec.Cmd
		if !ok {
			if started, err = startShared(prog, src, bin, dir, args); err != nil {
				_ = syscall.Flock(int(join.Fd()), syscall.LOCK_UN)
				return nil, err
			}
			note = sharedNote{dir: dir, pid: started.Process.Pid}
		}
		// Used from now: the cluster decides to stop only while holding
		// join.lock, and so cannot between the note read and this.
		if err := syscall.Flock(int(users.Fd()), syscall.LOCK_SH); err != nil {
			return nil, err
		}
		_ = syscall.Flock(int(join.Fd()), syscall.LOCK_UN)
		for !note.ready {
			time.Sleep(200 * time.Millisecond)
			now, ok := readNote()
			if !ok || now.pid != note.pid {
				break // it stopped before it was ready: start or join another
			}
			note = now
		}
		if !note.ready {
			if started != nil {
				return nil, fmt.Errorf("testcluster stopped before it was ready; see %s", filepath.Join(dir, "testcluster.log"))
			}
			continue
		}
		return &Cluster{Kubeconfig: filepath.Join(note.dir, "kubeconfig"), Kubectl: filepath.Join(note.dir, "bin", "kubectl"), Dir: note.dir}, nil
	}
	return nil, errors.New("no shared real-node cluster was ready within 45 minutes")
}

// startShared starts the shared cluster in dir, in a session of its own
// (it outlives this process), and notes it as starting.
func startShared(prog, src, bin, dir string, args []string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(dir, "testcluster.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(prog, append([]string{"--dir", dir, "--bin", bin, "--shared", SharedDir}, args...)...)
	cmd.Dir = src
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait() }()
	note := fmt.Sprintf("%s\n%d\nstarting\n", dir, cmd.Process.Pid)
	tmp := filepath.Join(SharedDir, "cluster.tmp")
	if err := os.WriteFile(tmp, []byte(note), 0o644); err != nil {
		return nil, err
	}
	return cmd, os.Rename(tmp, filepath.Join(SharedDir, "cluster"))
}
