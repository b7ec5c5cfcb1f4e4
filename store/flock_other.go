//go:build !unix

package store

import "os"

// lockFile holds nothing where flock does not exist: the single-server
// rule on SQLite is then the operator's.
func lockFile(*os.File) (bool, error) { return true, nil }

func unlockFile(f *os.File) error { return f.Close() }
