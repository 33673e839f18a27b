package testkit

import "os"

// DamagePages overwrites, with a pattern no page holds, every fifth page
// of the file at path from its fifth page up to the middle of the file:
// the meta pages stay valid, so bbolt would open the file and meet the
// damage on its walk. For tests of what opens a damaged file.
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
	for off := int64(4 * 4096); off+4096 <= fi.Size()/2; off += 5 * 4096 {
		if _, err := f.WriteAt(junk, off); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
