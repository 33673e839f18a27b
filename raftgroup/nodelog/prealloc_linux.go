package nodelog

import (
	"os"
	"syscall"
)

// preallocate gives f n bytes of zeros on disk from off, growing it, where
// the file system can.
func preallocate(f *os.File, off, n int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, off, n)
}
