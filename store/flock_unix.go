//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f without waiting: false if another
// open file description holds one. flock and SQLite's own fcntl locks are
// independent on Linux, so it does not disturb SQLite's locking; the file
// stays open until unlockFile, which runs after the database is closed
// (closing a descriptor drops the process's fcntl locks on the file).
func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: lock %s: %w", f.Name(), err)
	}
	return true, nil
}

func unlockFile(f *os.File) error {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
