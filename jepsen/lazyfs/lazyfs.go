// Package lazyfs is a FUSE file system (go-fuse) that keeps every write in
// memory until the file is fsynced, the way a disk's volatile cache and the
// kernel's page cache do, and can lose all of them at once: a power cut.
// It is the lazyfs approach (Jepsen's LazyFS), built small for the chaos
// harness: the nodes' data dirs are lazyfs mounts over a backing dir, and
// the power-loss fault kills every process using a mount, then calls
// PowerLoss. A process killed by SIGKILL alone loses nothing on a normal
// file system (the page cache survives it); under lazyfs a missing fsync
// loses data, as it would in a real power cut.
//
// What it models, and what it does not:
//   - File contents and sizes (write, truncate, fallocate-free growth) are
//     volatile until fsync or fdatasync of that file, page by page
//     (4 KiB); PowerLoss drops every such page and size change.
//   - Namespace operations (create, mkdir, rename, unlink, link) reach the
//     backing dir at once: they are durable immediately, as on a file
//     system that journals metadata synchronously. A program that forgets
//     to fsync a directory after a rename is not caught.
//   - A lost write is lost whole: no torn pages and no reordering within
//     what was not synced (LazyFS's "torn-seq" faults are not modelled).
//
// Every answer that carries a file's attributes (lookup, getattr, statx)
// gives the size readers see, never the backing file's: the kernel takes a
// smaller size for the file shrinking and zeroes its cached page past it.
//
// The kernel's page cache of a file is kept, as a local file system's is:
// every write reaches the file through it, so it is never stale, and it is
// never dropped but at a power cut (PowerLoss has the kernel drop the
// pages of every file that had unsynced writes). Letting the kernel drop
// it when a file's attributes change (FUSE's default, auto_inval_data)
// broke bbolt: an fsync moves the backing file's mtime, the next stat or
// open drops the cached pages, and a page fault on bbolt's mmap could be
// answered by this process before it had applied a write still in flight
// for the same page (the kernel had already put that write in the page it
// dropped), so a commit began from an older meta page: "page N already
// freed" panics and lost commits in nodes that had not lost power at all
// (TestCacheKeptUnderStatAndOpen).
//
// Mount needs root (or fusermount) and /dev/fuse.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// pageSize is the unit in which unsynced writes are kept.
const pageSize = 4096

// FS is one lazyfs mount.
type FS struct {
	backing, dir string

	mu     sync.Mutex
	files  map[uint64]*volatile // by backing inode: what is not synced yet
	opens  map[uint64]int       // by backing inode: open handles
	inodes map[uint64]*fs.Inode // by backing inode: the kernel's inode, to drop its cached pages
	server *fuse.Server

	// writeDelay (nanoseconds) holds every write back before it is
	// applied, so that tests can widen the window in which a write is in
	// flight.
	writeDelay atomic.Int64
}

// Lost is what a power cut dropped.
type Lost struct {
	// Files had unsynced writes or size changes; Bytes counts the bytes of
	// their unsynced pages.
	Files int
	Bytes int64
}

// Mount mounts a lazyfs at dir over the directory backing (both made if
// missing).
func Mount(backing, dir string) (*FS, error) {
	for _, d := range []string{backing, dir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	l := &FS{backing: backing, dir: dir, files: map[uint64]*volatile{}, opens: map[uint64]int{}, inodes: map[uint64]*fs.Inode{}}
	if err := l.mount(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(l.backing, &st); err != nil {
		return err
	}
	root := &fs.LoopbackRoot{Path: l.backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, l: l}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	zero := time.Duration(0)
	server, err := fs.Mount(l.dir, root.RootNode, &fs.Options{
		// No caching of names or attributes in the kernel: a size that a
		// power cut takes back must not be remembered there. File data is
		// cached, and dropped only at a power cut (see the package doc):
		// no invalidation when attributes change.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{FsName: "lazyfs:" + l.backing, Name: "lazyfs", DirectMount: true, AllowOther: true,
			MaxWrite: 1 << 20, ExplicitDataCacheControl: true},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount %s: %w", l.dir, err)
	}
	// Without it the kernel would drop cached pages whenever a file's
	// size changes, and the stale-page race (package doc) would be back.
	if server.KernelSettings().Flags64()&fuse.CAP_EXPLICIT_INVAL_DATA == 0 {
		_ = unmount(server)
		return fmt.Errorf("lazyfs: mount %s: the kernel offers no explicit data cache control (FUSE_EXPLICIT_INVAL_DATA, Linux 5.2)", l.dir)
	}
	l.server = server
	return nil
}

// Unmount unmounts the file system; writes not synced by then are dropped.
func (l *FS) Unmount() error {
	l.mu.Lock()
	server := l.server
	l.server = nil
	l.files = map[uint64]*volatile{}
	l.opens = map[uint64]int{}
	l.inodes = map[uint64]*fs.Inode{}
	l.mu.Unlock()
	if server == nil {
		return nil
	}
	return unmount(server)
}

// unmount retries while the kernel still releases files of processes
// just killed (EBUSY).
func unmount(server *fuse.Server) error {
	var err error
	for range 50 {
		if err = server.Unmount(); err == nil {
			server.Wait()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("lazyfs: unmount: %w", err)
}

// PowerLoss drops every write not yet fsynced, and has the kernel drop
// its cached pages and attributes of the files that had any. Every process
// using the mount must have been killed first. The mount stays (the
// nodes' own mount namespaces hold copies of every node's mount, so an
// unmount of one node's would wait for the others to end).
func (l *FS) PowerLoss() (Lost, error) {
	l.mu.Lock()
	lost := l.pendingLocked()
	var drop []*fs.Inode
	for ino, v := range l.files {
		if in := l.inodes[ino]; in != nil && v.pending() {
			drop = append(drop, in)
		}
	}
	l.files = map[uint64]*volatile{}
	l.mu.Unlock()
	for _, in := range drop {
		// The whole file (a size of 0 means to its end); ENOENT: the
		// kernel has forgotten the inode, and its pages with it.
		if errno := in.NotifyContent(0, 0); errno != 0 && errno != syscall.ENOENT {
			return lost, fmt.Errorf("lazyfs: drop cached pages: %w", errno)
		}
	}
	return lost, nil
}

// Pending is what a power cut would drop now.
func (l *FS) Pending() Lost {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pendingLocked()
}

// pendingLocked counts the files with unsynced changes (l.mu held).
func (l *FS) pendingLocked() Lost {
	var p Lost
	for _, v := range l.files {
		v.mu.Lock()
		if v.dirty {
			p.Files++
			p.Bytes += int64(len(v.pages)) * pageSize
		}
		v.mu.Unlock()
	}
	return p
}

// pending reports whether v holds unsynced writes or size changes.
func (v *volatile) pending() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dirty
}

// volatile is what a file's readers see that its backing file does not
// hold yet. A file has one from its first write or size change on; it is
// clean (dirty false, no pages) after an fsync. It stays in the map until
// the file's last name goes: a write racing an fsync always finds the one
// state of its file.
type volatile struct {
	mu    sync.Mutex
	dirty bool
	pages map[int64][]byte // page number → the page as readers see it
	size  int64            // the size readers see
	// low is the smallest size the file was cut to since the last sync:
	// backing bytes at or past it read as zeros.
	low int64
}

// state returns the volatile state of inode ino, or nil.
func (l *FS) state(ino uint64) *volatile {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[ino]
}

// stateFor returns the volatile state of the file open at fd (inode
// ino), making it from the backing file's size.
func (l *FS) stateFor(ino uint64, fd int) (*volatile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.files[ino]; v != nil {
		return v, nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	v := &volatile{pages: map[int64][]byte{}, size: st.Size, low: st.Size}
	l.files[ino] = v
	return v, nil
}

// forget drops the state of inode ino: the file was made anew (created,
// or opened with O_TRUNC).
func (l *FS) forget(ino uint64) {
	l.mu.Lock()
	delete(l.files, ino)
	delete(l.inodes, ino)
	l.mu.Unlock()
}

// forgetUnopened forgets inode ino, whose last name is gone, unless a
// handle still has it open (then its last Release does).
func (l *FS) forgetUnopened(ino uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opens[ino] > 0 {
		return
	}
	delete(l.files, ino)
	delete(l.inodes, ino)
}

// seen records in as the kernel's inode of backing inode ino.
func (l *FS) seen(ino uint64, in *fs.Inode) {
	l.mu.Lock()
	l.inodes[ino] = in
	l.mu.Unlock()
}

// opened counts a handle of inode ino.
func (l *FS) opened(ino uint64) {
	l.mu.Lock()
	l.opens[ino]++
	l.mu.Unlock()
}

// closed uncounts a handle of inode ino; the last handle of a file with
// no name left takes its state along (nothing can read it again, and the
// inode number may be reused).
func (l *FS) closed(ino uint64, nlink uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opens[ino]--; l.opens[ino] > 0 {
		return
	}
	delete(l.opens, ino)
	if nlink == 0 {
		delete(l.files, ino)
		delete(l.inodes, ino)
	}
}

// node is a loopback node whose files are opened as lazy files.
type node struct {
	fs.LoopbackNode
	l *FS
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeLookuper  = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeGetattrer = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeStatxer   = (*node)(nil)
	_ fs.NodeTmpfiler  = (*node)(nil)
)

func (n *node) backingPath(name string) string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()), name)
}

// Open opens the backing file and wraps it.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	if flags&syscall.O_TRUNC != 0 {
		// Applied to the backing file at once (a simplification).
		n.l.forget(n.StableAttr().Ino)
	}
	fd, err := syscall.Open(n.backingPath(""), int(flags), 0)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	f, errno := n.l.newFile(fd)
	if errno != 0 {
		return nil, 0, errno
	}
	n.l.seen(f.ino, n.EmbeddedInode())
	// Kept: the cache holds nothing this file system would not answer.
	return f, fuse.FOPEN_KEEP_CACHE, 0
}

// Create creates the backing file (at once) and wraps it.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	inode, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The loopback handle's descriptor becomes ours.
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	fd, err := syscall.Dup(fd)
	lf.Release(ctx)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	n.l.forget(inode.StableAttr().Ino)
	f, errno := n.l.newFile(fd)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// Two creators racing without O_EXCL could leave go-fuse keeping an
	// existing Inode instead of inode; the harness's nodes never do that
	// (one process per data dir).
	n.l.seen(f.ino, inode)
	return inode, f, fl | fuse.FOPEN_KEEP_CACHE, 0
}

// Tmpfile is not offered (O_TMPFILE callers fall back to a named file): the
// loopback's would bypass the volatile pages.
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// Statx answers the size readers see.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if errno := n.LoopbackNode.Statx(ctx, nil, flags, mask, out); errno != 0 {
		return errno
	}
	if v := n.l.state(out.Ino); v != nil {
		v.mu.Lock()
		out.Size = uint64(v.size)
		v.mu.Unlock()
	}
	return 0
}

// Lookup answers a name's attributes with the size readers see. The
// loopback's would give the backing file's size, behind the volatile one
// until the next sync: the kernel took that for the file shrinking, cut
// its cached pages there and zeroed the rest of the page, and the zeros
// stayed cached over data written before them (a log appending records
// while the data dir was walked read back zeros inside a synced segment:
// TestAppendsReadBackWhole).
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno != 0 {
		return in, errno
	}
	if v := n.l.state(out.Attr.Ino); v != nil {
		v.mu.Lock()
		out.Attr.Size = uint64(v.size)
		v.mu.Unlock()
	}
	return in, 0
}

// Getattr answers the size readers see.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if lf, ok := f.(*file); ok {
		return lf.Getattr(ctx, out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	if v := n.l.state(out.Ino); v != nil {
		v.mu.Lock()
		out.Size = uint64(v.size)
		v.mu.Unlock()
	}
	return 0
}

// Setattr keeps a size change volatile; the rest reaches the backing file.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		lf, _ := f.(*file)
		if lf == nil {
			fd, err := syscall.Open(n.backingPath(""), syscall.O_RDWR, 0)
			if err != nil {
				return fs.ToErrno(err)
			}
			defer syscall.Close(fd)
			lf = &file{l: n.l, fd: fd, ino: n.StableAttr().Ino}
			n.l.seen(lf.ino, n.EmbeddedInode())
		}
		if errno := lf.truncate(int64(sz)); errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	if in.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) != 0 {
		if errno := n.LoopbackNode.Setattr(ctx, nil, in, out); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, f, out)
}

// Unlink forgets the volatile state of a file whose last name goes and
// that nobody has open (an open one keeps it until its last handle goes).
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	last, ino := n.lastName(name)
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 && last {
		n.l.forgetUnopened(ino)
	}
	return errno
}

// Rename forgets the volatile state of a file the rename replaces (as
// Unlink does); an exchange replaces nothing.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	p, _ := newParent.(*node)
	var last bool
	var ino uint64
	if p != nil && flags&renameExchange == 0 {
		last, ino = p.lastName(newName)
	}
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 && last {
		p.l.forgetUnopened(ino)
	}
	return errno
}

// renameExchange is renameat2's RENAME_EXCHANGE.
const renameExchange = 1 << 1

// lastName reports whether name is its file's last name, and the file's
// backing inode.
func (n *node) lastName(name string) (bool, uint64) {
	var st syscall.Stat_t
	if syscall.Lstat(n.backingPath(name), &st) != nil || st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return false, 0
	}
	return st.Nlink <= 1, st.Ino
}

// file is an open lazy file: reads see its volatile pages over the backing
// file, writes go to them, fsync writes them through.
type file struct {
	l   *FS
	fd  int
	ino uint64 // the backing inode: the key of the file's volatile state
	mu  sync.Mutex
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
)

// newFile wraps the backing descriptor fd as an open lazy file (closing
// fd if it cannot).
func (l *FS) newFile(fd int) (*file, syscall.Errno) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, fs.ToErrno(err)
	}
	l.opened(st.Ino)
	return &file{l: l, fd: fd, ino: st.Ino}, 0
}

// Read reads what readers see: volatile pages, else the backing file.
func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ino := f.ino
	v := f.l.state(ino)
	if v == nil {
		n, err := syscall.Pread(f.fd, dest, off)
		if err != nil {
			return nil, fs.ToErrno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if off >= v.size {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), v.size)
	for pos := off; pos < end; {
		pg, po := pos/pageSize, pos%pageSize
		chunk := min(pageSize-po, end-pos)
		out := dest[pos-off : pos-off+chunk]
		switch p, ok := v.pages[pg]; {
		case ok:
			copy(out, p[po:po+chunk])
		default:
			clear(out)
			if pos < v.low {
				k := min(chunk, v.low-pos)
				if _, err := syscall.Pread(f.fd, out[:k], pos); err != nil {
					return nil, fs.ToErrno(err)
				}
			}
		}
		pos += chunk
	}
	return fuse.ReadResultData(dest[:end-off]), 0
}

// Write keeps data in volatile pages.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ino := f.ino
	if d := f.l.writeDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	v, err := f.l.stateFor(ino, f.fd)
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	end := off + int64(len(data))
	for pos := off; pos < end; {
		pg, po := pos/pageSize, pos%pageSize
		chunk := min(pageSize-po, end-pos)
		p, err := v.page(f.fd, pg)
		if err != nil {
			return 0, fs.ToErrno(err)
		}
		copy(p[po:po+chunk], data[pos-off:pos-off+chunk])
		pos += chunk
	}
	v.size, v.dirty = max(v.size, end), true
	return uint32(len(data)), 0
}

// page returns page pg, loading it from the backing file (zeros past low).
func (v *volatile) page(fd int, pg int64) ([]byte, error) {
	if p, ok := v.pages[pg]; ok {
		return p, nil
	}
	p := make([]byte, pageSize)
	if start := pg * pageSize; start < v.low {
		if _, err := syscall.Pread(fd, p[:min(pageSize, v.low-start)], start); err != nil {
			return nil, err
		}
	}
	v.pages[pg] = p
	return p, nil
}

// truncate sets the size readers see.
func (f *file) truncate(size int64) syscall.Errno {
	ino := f.ino
	v, err := f.l.stateFor(ino, f.fd)
	if err != nil {
		return fs.ToErrno(err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for pg, p := range v.pages {
		switch start := pg * pageSize; {
		case start >= size:
			delete(v.pages, pg)
		case start+pageSize > size:
			clear(p[size-start:])
		}
	}
	v.size, v.dirty = size, true
	v.low = min(v.low, size)
	return 0
}

// Fsync writes the volatile pages and size through to the backing file
// and syncs it: from here on a power cut keeps them.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ino := f.ino
	if v := f.l.state(ino); v != nil {
		v.mu.Lock()
		err := v.writeThrough(f.fd)
		v.mu.Unlock()
		if err != nil {
			return fs.ToErrno(err)
		}
	}
	return fs.ToErrno(syscall.Fsync(f.fd))
}

// writeThrough puts v's pages and size into the backing file at fd.
func (v *volatile) writeThrough(fd int) error {
	if !v.dirty {
		return nil
	}
	if err := syscall.Ftruncate(fd, v.low); err != nil {
		return err
	}
	for pg, p := range v.pages {
		start := pg * pageSize
		n := min(pageSize, v.size-start)
		if n <= 0 {
			continue
		}
		if _, err := syscall.Pwrite(fd, p[:n], start); err != nil {
			return err
		}
	}
	if err := syscall.Ftruncate(fd, v.size); err != nil {
		return err
	}
	clear(v.pages)
	v.low, v.dirty = v.size, false
	return nil
}

// Flush keeps volatile pages volatile: closing a file syncs nothing.
func (f *file) Flush(ctx context.Context) syscall.Errno { return 0 }

// Release closes the backing descriptor; volatile pages stay (but for a
// file whose names are all gone and that nobody has open any more).
func (f *file) Release(ctx context.Context) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 {
		return syscall.EBADF
	}
	var st syscall.Stat_t
	nlink := uint64(1)
	if syscall.Fstat(f.fd, &st) == nil {
		nlink = st.Nlink
	}
	f.l.closed(f.ino, nlink)
	err := syscall.Close(f.fd)
	f.fd = -1
	return fs.ToErrno(err)
}

// Getattr answers the backing file's attributes with the size readers
// see.
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	if v := f.l.state(st.Ino); v != nil {
		v.mu.Lock()
		out.Size = uint64(v.size)
		v.mu.Unlock()
	}
	return 0
}

// Setattr through an open file: a size change stays volatile.
func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if errno := f.truncate(int64(sz)); errno != 0 {
			return errno
		}
	}
	return f.Getattr(ctx, out)
}

// ErrNoFuse is returned by Available when this machine cannot mount FUSE.
var ErrNoFuse = errors.New("lazyfs: /dev/fuse is missing")

// Available reports whether FUSE can be mounted here.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoFuse, err)
	}
	return nil
}
