//go:build !windows

package checkpoint

import "os"

// syncDir makes a rename in dir durable. Errors are ignored: some file
// systems cannot sync a folder, and the rename itself has succeeded.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
