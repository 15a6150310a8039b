package clshim

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
)

// CacheDirEnv names the environment variable that overrides the program
// binary cache directory.
const CacheDirEnv = "VRUN_CACHE_DIR"

// Environment variables of the cold-start experiments (see the package
// documentation).
const (
	// BuildOptsEnv adds clBuildProgram options to every program.
	BuildOptsEnv = "VRUN_CL_OPTS"
	// BuildJobsEnv sets how many programs Prepare builds at once.
	BuildJobsEnv = "VRUN_CL_JOBS"
	// BuildLogEnv names a file ("-": stderr) that gets a line per
	// program build.
	BuildLogEnv = "VRUN_CL_BUILDLOG"
	// BuildCtxEnv sets how many extra contexts programs are built in
	// (then loaded from their binaries); unset or 0: none.
	BuildCtxEnv = "VRUN_CL_BUILDCTX"
)

// cacheDir returns the directory of cached program binaries:
// $VRUN_CACHE_DIR/opencl when set, else os.UserCacheDir()/vrun/opencl,
// or "" when neither is known (then nothing is cached).
func cacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return filepath.Join(d, "opencl")
	}
	d, err := os.UserCacheDir()
	if err != nil || d == "" {
		return ""
	}
	return filepath.Join(d, "vrun", "opencl")
}

// cacheKey hashes everything a program binary depends on.
func cacheKey(device, driver, source, options string) string {
	h := sha256.New()
	for _, s := range []string{"vrun-opencl-1", device, driver, source, options} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// cachePath is the file of key in dir.
func cachePath(dir, key string) string { return filepath.Join(dir, key+".bin") }

// readCache returns the cached binary for key, or nil.
func readCache(dir, key string) []byte {
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(cachePath(dir, key))
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

// writeCache stores bin under key atomically (temporary file, then
// rename). Failures are ignored: the cache is only an optimisation.
func writeCache(dir, key string, bin []byte) {
	if dir == "" || len(bin) == 0 {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, key+".*.tmp")
	if err != nil {
		return
	}
	_, werr := f.Write(bin)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return
	}
	if err := os.Rename(f.Name(), cachePath(dir, key)); err != nil {
		os.Remove(f.Name())
	}
}
