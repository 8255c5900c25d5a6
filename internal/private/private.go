// Package private creates the files and directories Kassa keeps so that only the user Kassa runs as
// can read them: files 0600, directories 0700, whatever the umask of the process that creates them.
// The mode is set on the file after it is created, not left to the umask, which could leave it
// readable by every local user (umask 022, the usual default, makes a 0644 file of what asked for
// 0666) or, with an unusual umask, unwritable by Kassa itself.
//
// What Kassa keeps on disk holds secrets even where they are sealed: the SQLite database and its
// journals, backups, key-encryption keys, the emulated acquirer's journal, the server's profiles.
package private

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The modes of what this package makes.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// Dir makes the directory path, and any missing parent, with the mode 0700. An existing directory of
// another mode is given 0700, and was is the mode it had; was is 0 when Dir made path or it already had
// that mode. Parents that exist are left as they are.
func Dir(path string) (was fs.FileMode, err error) {
	if st, err := os.Stat(path); err == nil {
		if !st.IsDir() {
			return 0, &fs.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
		}
		return set(path, DirMode)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if parent := filepath.Dir(path); parent != path {
		if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
			if _, err := Dir(parent); err != nil {
				return 0, err
			}
		}
	}
	// Made here with the mode the umask leaves, which may lack the owner's own access: set after.
	if err := os.Mkdir(path, DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return 0, err
	}
	return 0, os.Chmod(path, DirMode)
}

// Tighten gives the existing file path the mode 0600, and returns the mode it had when that was
// another (0 when it had that mode, or there is no such file).
func Tighten(path string) (was fs.FileMode, err error) {
	was, err = set(path, FileMode)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return was, err
}

// set gives path the permission bits mode when it has others, and returns the bits it had then.
func set(path string, mode fs.FileMode) (fs.FileMode, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if st.Mode().Perm() == mode {
		return 0, nil
	}
	return st.Mode().Perm(), os.Chmod(path, mode)
}

// OpenFile opens the file path with flag, creating it when missing (os.O_CREATE is added), and gives
// it the mode 0600.
func OpenFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_CREATE, FileMode)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Mode().Perm() != FileMode {
		err = f.Chmod(FileMode)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Changed is a file or directory whose mode was changed, and the mode it had.
type Changed struct {
	Path string
	Was  fs.FileMode
}

// SQLite makes the SQLite database at path, if missing, so that SQLite opens a file of mode 0600, and
// gives an existing database and its journals (-wal, -shm, -journal) that mode; it returns those whose
// mode it changed. SQLite creates a database file with the mode 0644 less the umask, but a journal with
// the mode of its database, which it sets whatever the umask: with the database made beforehand,
// every file of it is 0600.
func SQLite(path string) ([]Changed, error) {
	var changed []Changed
	for _, name := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		was, err := Tighten(name)
		if err != nil {
			return changed, err
		}
		if was != 0 {
			changed = append(changed, Changed{name, was})
		}
	}
	f, err := OpenFile(path, os.O_RDWR)
	if err != nil {
		return changed, err
	}
	return changed, f.Close()
}

// Create creates the file path, or empties it, for writing, with the mode 0600.
func Create(path string) (*os.File, error) {
	return OpenFile(path, os.O_WRONLY|os.O_TRUNC)
}

// WriteFile writes data to the file path, created or emptied, with the mode 0600.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
