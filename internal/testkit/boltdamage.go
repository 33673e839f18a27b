package testkit

import "os"

// DamageBoltPages overwrites, with a pattern no page holds, every page of
// the bbolt file at path but its two meta pages: the meta pages stay
// valid, so bbolt would open the file and meet the damage on its walk
// (the root page is always among those overwritten, however small the
// file). For tests of what opens a damaged file. (Overwriting only some
// pages of the file's first half missed every page in use when a file had
// not grown past bbolt's initial 32 KiB.)
func DamageBoltPages(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = 0xAB
	}
	for off := int64(2 * 4096); off+4096 <= fi.Size(); off += 4096 {
		if _, err := f.WriteAt(junk, off); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
