package storetest

import (
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// WantPrivate fails t unless dir and every directory under it are 0700 and every file 0600, as Kassa
// makes what it keeps (package private), and dir holds at least the files named want.
func WantPrivate(t testing.TB, dir string, want ...string) {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		} else {
			found = append(found, d.Name())
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s has the mode %04o, want %04o", path, info.Mode().Perm(), mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		if !slices.Contains(found, name) {
			t.Errorf("%s holds no %s: %v", dir, name, found)
		}
	}
}
