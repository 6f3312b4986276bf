//go:build unix

package archive

import (
	"io/fs"
	"syscall"
)

// owner is a file's user and group ids.
func owner(info fs.FileInfo) (uid, gid int) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}
