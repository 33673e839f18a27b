package main

import (
	"os"
	"syscall"
)

// fdatasync is what bbolt calls at each commit on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
