package private_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kassapay/kassa/internal/private"
)

// What the package makes is 0700 or 0600 whatever the umask: 000, which leaves a mode as asked; 022,
// the usual one; 0277, which would take the owner's own write access away. An existing file or
// directory of another mode gets the private one, and the mode it had is returned. The test changes
// the process's umask, so it runs alone.
func TestModesWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o277} {
		t.Run(fmt.Sprintf("umask %04o", umask), func(t *testing.T) {
			base := t.TempDir() // before the umask, which could make it unwritable
			defer syscall.Umask(syscall.Umask(umask))
			dir := filepath.Join(base, "a", "b")
			if was, err := private.Dir(dir); err != nil || was != 0 {
				t.Fatalf("Dir of a new directory: %04o, %v", was, err)
			}
			file := filepath.Join(dir, "written")
			if err := private.WriteFile(file, []byte("secret")); err != nil {
				t.Fatal(err)
			}
			if err := private.WriteFile(file, []byte("again")); err != nil { // an existing file is emptied and written
				t.Fatal(err)
			}
			f, err := private.OpenFile(filepath.Join(dir, "opened"), os.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			sqlite := filepath.Join(dir, "kassa.db")
			if changed, err := private.SQLite(sqlite); err != nil || len(changed) != 0 {
				t.Fatalf("SQLite of a new database: %v, %v", changed, err)
			}
			for path, want := range map[string]os.FileMode{dir: 0o700, file: 0o600, filepath.Join(dir, "opened"): 0o600, sqlite: 0o600} {
				if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
					t.Errorf("%s: %v, %v; want %04o", path, st.Mode().Perm(), err, want)
				}
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != "again" {
				t.Errorf("the file holds %q, %v", b, err)
			}

			// What an earlier version left as the umask made it.
			for path, m := range map[string]os.FileMode{dir: 0o755, sqlite: 0o644, sqlite + "-wal": 0o644} {
				if path == sqlite+"-wal" {
					if err := os.WriteFile(path, nil, m); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(path, m); err != nil {
					t.Fatal(err)
				}
			}
			if was, err := private.Dir(dir); err != nil || was != 0o755 || mode(t, dir) != 0o700 {
				t.Errorf("Dir of a directory 0755: %04o, %v; now %04o", was, err, mode(t, dir))
			}
			changed, err := private.SQLite(sqlite)
			want := []private.Changed{{sqlite, 0o644}, {sqlite + "-wal", 0o644}}
			if err != nil || fmt.Sprint(changed) != fmt.Sprint(want) || mode(t, sqlite) != 0o600 || mode(t, sqlite+"-wal") != 0o600 {
				t.Errorf("SQLite of a database 0644: %v, %v", changed, err)
			}
		})
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
