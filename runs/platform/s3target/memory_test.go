package s3target_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/skali-dev/studio/runs/platform/s3target"
	"github.com/skali-dev/studio/runs/platform/s3target/s3test"
)

// stream writes size bytes through a new file of tg in 64 KiB writes and
// returns the largest heap growth seen meanwhile.
func stream(tb testing.TB, tg *s3target.Target, name string, size int64) uint64 {
	tb.Helper()
	ctx := context.Background()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	w, err := tg.Create(ctx, "inst", "shop/production/big", name)
	if err != nil {
		tb.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for n := int64(0); n < size; n += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			tb.Fatal(err)
		}
	}
	f, err := w.Commit()
	close(stop)
	wg.Wait()
	if err != nil || f.Size != size {
		tb.Fatalf("commit %+v %v", f, err)
	}
	if peak < base {
		return 0
	}
	return peak - base
}

// A file many times larger than a part streams with about one part in
// memory: the heap grows by far less than the file, whatever its size.
func TestWriteMemoryIsBounded(t *testing.T) {
	srv := s3test.Start(t, "backups")
	tg := target(t, srv, "s3://backups/studio", nil) // 5 MiB parts
	if err := tg.Mark(context.Background(), "inst"); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 20
	growth := stream(t, tg, "database-main.snapshot", size)
	t.Logf("heap growth while streaming %d MiB in 5 MiB parts: %.1f MiB", size>>20, float64(growth)/(1<<20))
	if growth > 48<<20 {
		t.Fatalf("the heap grew by %.1f MiB while streaming %d MiB: the file is held in memory", float64(growth)/(1<<20), size>>20)
	}
	if objs := srv.Objects(t, "backups", "studio/shop/"); objs["studio/shop/production/big/database-main.snapshot"] != size {
		t.Fatalf("objects: %v", objs)
	}
}

// BenchmarkStreamToS3 streams a 64 MiB snapshot file to the S3 test
// server in the default 16 MiB parts (throughput, and the heap's growth).
func BenchmarkStreamToS3(b *testing.B) {
	srv := s3test.Start(b, "backups")
	tg, err := s3target.New(s3target.Config{URL: "s3://backups/studio", Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		AccessKey: srv.Access, SecretKey: srv.Secret})
	if err != nil {
		b.Fatal(err)
	}
	if err := tg.Mark(context.Background(), "inst"); err != nil {
		b.Fatal(err)
	}
	const size = 64 << 20
	b.SetBytes(size)
	var worst uint64
	for b.Loop() {
		worst = max(worst, stream(b, tg, "database-main.snapshot", size))
	}
	b.ReportMetric(float64(worst)/(1<<20), "heap-MiB")
}
