// Command fsynccost measures what one fdatasync costs on the disk under a
// directory: the wall time and the CPU time of the calling process (user
// and system, from getrusage) per call, after writing 1, 8 or 32 pages of
// 4 KB at scattered offsets of a file whose blocks are already allocated
// and synced (as a bbolt file's mostly are). It is what a durable commit of
// the embedded store pays at least once per transaction (bbolt syncs twice:
// the pages, then the meta page), whatever else the commit does.
//
//	go run ./internal/tools/fsynccost -dir /tmp
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure (a file of -size is written there and removed)")
	size := flag.Int64("size", 64<<20, "size of the file")
	n := flag.Int("n", 300, "fdatasync calls per measurement")
	flag.Parse()
	if err := run(*dir, *size, *n); err != nil {
		fmt.Fprintln(os.Stderr, "fsynccost:", err)
		os.Exit(1)
	}
}

func run(dir string, size int64, n int) error {
	f, err := os.CreateTemp(dir, "fsynccost-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// Allocate and sync every block first, so that the measured syncs
	// flush data, not block allocation.
	chunk := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk, off); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	const page = 4096
	pages := size / page
	buf := make([]byte, page)
	fmt.Printf("fdatasync on %s (%s), %d calls each:\n", filepath.Dir(f.Name()), fsType(dir), n)
	for _, dirty := range []int{1, 8, 32} {
		cpu0, t0 := processCPU(), time.Now()
		for i := 0; i < n; i++ {
			for p := 0; p < dirty; p++ {
				// Scattered pages, as a B+tree's leaves are.
				off := ((int64(i*dirty+p) * 7919) % pages) * page
				if _, err := f.WriteAt(buf, off); err != nil {
					return err
				}
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				return err
			}
		}
		wall, cpu := time.Since(t0)/time.Duration(n), (processCPU()-cpu0)/time.Duration(n)
		fmt.Printf("  %2d dirty pages: wall %6.0f µs, CPU %6.0f µs per fdatasync (writes included)\n",
			dirty, float64(wall)/float64(time.Microsecond), float64(cpu)/float64(time.Microsecond))
	}
	return nil
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fsType names the file system type of dir, or "unknown".
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x01021994:
		return "tmpfs"
	case 0x9123683E:
		return "btrfs"
	}
	return fmt.Sprintf("type %#x", st.Type)
}
