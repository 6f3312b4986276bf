package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pgProcs reads, from /proc (Linux; elsewhere it reads nothing), the CPU
// time of the bench's PostgreSQL and of the Studio's LISTEN backend, to
// tell where NOTIFY's cost goes: PostgreSQL signals every backend that
// LISTENs in the database on every commit that notified, whatever the
// channel, and such a backend wakes even when the notification is not for
// it.
type pgProcs struct {
	postmaster int // 0: unknown
}

// newPGProcs finds the postmaster of the cluster in dataDir.
func newPGProcs(dataDir string) pgProcs {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return pgProcs{}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pgProcs{postmaster: pid}
}

// procCPU is the time the process (its main thread) ran, from
// /proc/<pid>/schedstat, which counts in nanoseconds (/proc/<pid>/stat
// counts in clock ticks, too coarse for a few µs per event).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// procWakeups is how many times the process went to sleep and was woken
// (its voluntary context switches).
func procWakeups(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// cpu is the CPU time of the postmaster and all its children (the
// backends, the writers' among them, and the background processes).
func (p pgProcs) cpu() time.Duration {
	if p.postmaster == 0 {
		return 0
	}
	total := procCPU(p.postmaster)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(p.postmaster) {
			total += procCPU(pid)
		}
	}
	return total
}

// listenerPID is the process id of the Studio's LISTEN backend (the event
// hub's connection names itself skali-studio-events), 0 when it has none.
func (b *bench) listenerPID(ctx context.Context) int {
	var pid int
	_ = b.db.Pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = 'skali-studio-events'`).Scan(&pid)
	return pid
}

// pgSample is one reading of pgProcs and the listener.
type pgSample struct {
	cpu, listenerCPU time.Duration
	listenerWakeups  int64
}

func (b *bench) samplePG(listener int) pgSample {
	s := pgSample{cpu: b.pg.cpu()}
	if listener > 0 {
		s.listenerCPU, s.listenerWakeups = procCPU(listener), procWakeups(listener)
	}
	return s
}
