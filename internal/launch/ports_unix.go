//go:build unix

package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// The ports handed out are reserved across processes by a record lock on
// their byte of one file per user: the kernel drops a process's locks when
// it exits, however it exits, so a port is never reserved by a process
// that is gone. The file stays open for the life of the process, since
// closing any descriptor of it would drop every lock the process holds.
var (
	reserveOnce sync.Once
	reserveFd   int
	reserveErr  error
)

// reservePort locks port's byte of the reservation file: false if another
// process holds it.
func reservePort(port int) (bool, error) {
	reserveOnce.Do(func() {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("locker-ports-%d.lock", os.Getuid()))
		reserveFd, reserveErr = syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
		if reserveErr != nil {
			reserveErr = fmt.Errorf("port reservations: open %s: %w", path, reserveErr)
		}
	})
	if reserveErr != nil {
		return false, reserveErr
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	switch err := syscall.FcntlFlock(uintptr(reserveFd), syscall.F_SETLK, &lk); {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("port reservations: lock port %d: %w", port, err)
	}
}
