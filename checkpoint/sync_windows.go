package checkpoint

// syncDir does nothing on Windows, where a folder cannot be opened for
// syncing and MoveFileEx (os.Rename) replaces the target in one step.
func syncDir(dir string) {}
