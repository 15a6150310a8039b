package cudashim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vrun-go/vrun/rt"
)

// kernelsDir finds kernels/ whether the test runs in the package
// directory (go test) or in the repository root (a prebuilt test binary).
func kernelsDir() string {
	if st, err := os.Stat("kernels"); err == nil && st.IsDir() {
		return "kernels"
	}
	return filepath.Join("cudashim", "kernels")
}

// ownModules are the .cu files that compile to a PTX module of their own
// (indexed.ptx, optim.ptx); kernels.ptx is every other .cu file.
var ownModules = []string{"indexed.cu", "optim.cu"}

// sourcesHash is build.sh's hash of a module's sources: for each source
// in byte order of their names, the name, "\n" and the bytes. The
// sources of kernels.ptx (cu "") are kernels/*.cu except those of
// ownModules, *.cuh and build.sh; those of indexed.ptx (cu "indexed.cu")
// are indexed.cu, *.cuh and build.sh, and so on.
func sourcesHash(t *testing.T, cu string) string {
	t.Helper()
	var names []string
	for _, pat := range []string{"*.cu", "*.cuh", "build.sh"} {
		m, err := filepath.Glob(filepath.Join(kernelsDir(), pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			n := filepath.Base(f)
			if strings.HasSuffix(n, ".cu") && ((cu == "" && slices.Contains(ownModules, n)) || (cu != "" && n != cu)) {
				continue
			}
			names = append(names, n)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(kernelsDir(), n))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(n + "\n"))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashRecord reads file's .sha256 record (two lines: "sources <hash>" and
// the build's own line), checks its sources hash against the current
// sources of the module built from cu (see sourcesHash), and returns the
// lines.
func hashRecord(t *testing.T, file, cu string) []string {
	t.Helper()
	rec, err := os.ReadFile(filepath.Join(kernelsDir(), file+".sha256"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%s.sha256: want 2 lines, got %q", file, rec)
	}
	got := sourcesHash(t, cu)
	if want := strings.TrimPrefix(lines[0], "sources "); want != got {
		t.Fatalf("kernel sources changed since %s was built (recorded %s, now %s): run cudashim/kernels/build.sh", file, want, got)
	}
	return lines
}

// TestPTXMatchesSources checks, for each PTX module, that its .sha256
// file records the hash of the module's current sources and of the
// embedded PTX, so the PTX cannot drift from the .cu files, and the same
// of each module's fatbin (fatbinMatchesSources). It needs no GPU. A
// placeholder module (build.sh --placeholder, --indexed-placeholder or
// --optim-placeholder, where nvcc is unavailable) skips the PTX check.
func TestPTXMatchesSources(t *testing.T) {
	for _, m := range []struct {
		file        string
		cu          string
		ptx         string
		placeholder bool
		entries     []string
	}{
		{"kernels.ptx", "", embeddedPTX, PTXIsPlaceholder(), kernelEntryNames},
		{"indexed.ptx", "indexed.cu", embeddedIndexedPTX, IndexedPTXIsPlaceholder(), indexedEntryNames},
		{"optim.ptx", "optim.cu", embeddedOptimPTX, OptimPTXIsPlaceholder(), optimEntryNames},
	} {
		t.Run(m.file, func(t *testing.T) {
			lines := hashRecord(t, m.file, m.cu)
			if m.placeholder {
				if lines[1] != "placeholder" {
					t.Fatalf("%s is a placeholder but %s.sha256 records %q", m.file, m.file, lines[1])
				}
				t.Skipf("sources hash matches, but the embedded %s is a placeholder; run cudashim/kernels/build.sh on a machine with nvcc", m.file)
			}
			sum := sha256.Sum256([]byte(m.ptx))
			if want, got := strings.TrimPrefix(lines[1], "ptx "), hex.EncodeToString(sum[:]); want != got {
				t.Fatalf("%s hash %s, recorded %s: rebuild with cudashim/kernels/build.sh", m.file, got, want)
			}
			ver, target := PTXVersion(m.ptx)
			if ver == "" || target != "sm_75" {
				t.Fatalf("%s declares .version %q .target %q, want a version and sm_75 (build.sh uses -arch=compute_75)", m.file, ver, target)
			}
			for _, n := range m.entries {
				if !bytes.Contains([]byte(m.ptx), []byte(".entry "+n+"(")) {
					t.Errorf("%s lacks entry %s", m.file, n)
				}
			}
			t.Logf("%s: PTX ISA %s, target %s, %d bytes", m.file, ver, target, len(m.ptx))
		})
	}
	fatbinMatchesSources(t)
}

// fatbinMatchesSources checks, for each module, that its
// module.fatbin.sha256 records the hash of the module's current sources
// (the same as the PTX's) and of the embedded fatbin, and that the fatbin
// holds SASS for exactly sm_80 and sm_90 and no PTX. It needs no GPU. A
// placeholder fatbin (empty; "placeholder" recorded) skips the fatbin
// checks; a placeholder PTX module needs a placeholder fatbin.
func fatbinMatchesSources(t *testing.T) {
	for _, m := range []struct {
		file           string
		cu             string
		fatbin         []byte
		ptxPlaceholder bool
	}{
		{"kernels.fatbin", "", embeddedFatbin, PTXIsPlaceholder()},
		{"indexed.fatbin", "indexed.cu", embeddedIndexedFatbin, IndexedPTXIsPlaceholder()},
		{"optim.fatbin", "optim.cu", embeddedOptimFatbin, OptimPTXIsPlaceholder()},
	} {
		t.Run(m.file, func(t *testing.T) {
			lines := hashRecord(t, m.file, m.cu)
			if lines[1] == "placeholder" {
				if len(m.fatbin) != 0 {
					t.Fatalf("%s.sha256 records a placeholder but the embedded %s has %d bytes", m.file, m.file, len(m.fatbin))
				}
				t.Skipf("sources hash matches, but %s is a placeholder (devices JIT-compile the PTX); run cudashim/kernels/build.sh on a machine with nvcc", m.file)
			}
			if m.ptxPlaceholder {
				t.Fatalf("%s is built but its PTX module is a placeholder: run cudashim/kernels/build.sh", m.file)
			}
			sum := sha256.Sum256(m.fatbin)
			if want, got := strings.TrimPrefix(lines[1], "fatbin "), hex.EncodeToString(sum[:]); want != got {
				t.Fatalf("%s hash %s, recorded %s: rebuild with cudashim/kernels/build.sh", m.file, got, want)
			}
			sass, ptx, err := FatbinArchs(m.fatbin)
			if err != nil {
				t.Fatalf("%s: %v", m.file, err)
			}
			if !slices.Equal(sass, []int{80, 90}) || len(ptx) != 0 {
				t.Fatalf("%s holds SASS %v and PTX %v, want SASS [80 90] and no PTX (build.sh's -gencode flags)", m.file, sass, ptx)
			}
			t.Logf("%s: SASS %s, %d bytes", m.file, archList(sass), len(m.fatbin))
		})
	}
}

// TestFatbinArchs checks the fatbin parser on hand-made fatbins and the
// choice of cubin for a compute capability.
func TestFatbinArchs(t *testing.T) {
	entry := func(kind uint16, arch uint32, payload int) []byte {
		b := make([]byte, 64+payload)
		le := binary.LittleEndian
		le.PutUint16(b, kind)
		le.PutUint16(b[2:], 0x0101)
		le.PutUint32(b[4:], 64)
		le.PutUint64(b[8:], uint64(payload))
		le.PutUint32(b[28:], arch)
		return b
	}
	fat := func(entries ...[]byte) []byte {
		body := bytes.Join(entries, nil)
		b := make([]byte, 16, 16+len(body))
		le := binary.LittleEndian
		le.PutUint32(b, fatbinMagic)
		le.PutUint16(b[4:], 1)
		le.PutUint16(b[6:], 16)
		le.PutUint64(b[8:], uint64(len(body)))
		return append(b, body...)
	}
	good := fat(entry(2, 80, 13), entry(1, 75, 5), entry(2, 90, 0))
	sass, ptx, err := FatbinArchs(good)
	if err != nil || !slices.Equal(sass, []int{80, 90}) || !slices.Equal(ptx, []int{75}) {
		t.Fatalf("FatbinArchs = %v, %v, %v; want [80 90], [75], nil", sass, ptx, err)
	}
	for _, bad := range [][]byte{nil, good[:15], good[:len(good)-1], append([]byte{0}, good[1:]...), fat(entry(2, 80, 3))[:16+64+2]} {
		if _, _, err := FatbinArchs(bad); err == nil {
			t.Errorf("FatbinArchs accepted a bad fatbin of %d bytes", len(bad))
		}
	}
	for _, c := range []struct{ cc, want int }{
		{75, 0}, {80, 80}, {86, 80}, {87, 80}, {89, 80}, {90, 90}, {100, 0}, {120, 0},
	} {
		if got := sassFor([]int{80, 90}, c.cc); got != c.want {
			t.Errorf("sassFor([80 90], %d) = %d, want %d", c.cc, got, c.want)
		}
	}
	if got := archList([]int{80, 90}); got != "sm_80, sm_90" {
		t.Errorf("archList = %q", got)
	}
}

// TestIndexedPlaceholderFile checks that a placeholder indexed.ptx is the
// explicit placeholder build.sh writes, not an empty or truncated file.
func TestIndexedPlaceholderFile(t *testing.T) {
	if IndexedPTXIsPlaceholder() {
		return
	}
	if !strings.Contains(embeddedIndexedPTX, ".entry") {
		t.Fatalf("indexed.ptx is neither the placeholder nor PTX with entries (%d bytes)", len(embeddedIndexedPTX))
	}
}

// TestScatterEnumMatchesRT checks the S_* codes of kernels/indexed.cu
// against rt.ScatterFn.
func TestScatterEnumMatchesRT(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(kernelsDir(), "indexed.cu"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\bS_(\w+)\s*=\s*(\d+)`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		v, _ := strconv.Atoi(m[2])
		if rt.ScatterFn(v).String() != m[1] {
			t.Errorf("indexed.cu: S_%s = %d, but rt names %d %q", m[1], v, v, rt.ScatterFn(v))
		}
		n++
	}
	if n != int(rt.ScatterMin)+1 {
		t.Errorf("indexed.cu enumerates %d scatter functions; rt has %d", n, rt.ScatterMin+1)
	}
}

// TestEnumsMatchRT checks the function codes in kernels/common.cuh
// against package rt.
func TestEnumsMatchRT(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(kernelsDir(), "common.cuh"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\b([UBR]|DT)_(\w+)\s*=\s*(\d+)`)
	seen := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		v, _ := strconv.Atoi(m[3])
		seen[m[1]]++
		var name string
		switch m[1] {
		case "U":
			name = rt.UnaryFn(v).String()
		case "B":
			name = rt.BinaryFn(v).String()
		case "R":
			name = rt.ReduceFn(v).String()
		case "DT":
			name = strings.ToUpper(rt.DType(v).String())
			if m[2] == "BOOL" {
				name = "BOOL"
			}
		}
		if name != m[2] {
			t.Errorf("common.cuh: %s_%s = %d, but rt names %d %q", m[1], m[2], v, v, name)
		}
	}
	if seen["U"] != rt.NumUnaryFns || seen["B"] != rt.NumBinaryFns || seen["R"] != rt.NumReduceFns || seen["DT"] != 8 {
		t.Errorf("common.cuh enumerates %v; rt has %d unary, %d binary, %d reduce functions and 8 dtypes",
			seen, rt.NumUnaryFns, rt.NumBinaryFns, rt.NumReduceFns)
	}
}

// TestCoalesce checks the elementwise iteration-space merging.
func TestCoalesce(t *testing.T) {
	// Contiguous [2,3,4] with a broadcast operand along the last dim.
	sp, ok := coalesce([]int{2, 3, 4}, []int{12, 4, 1}, []int{1, 0, 0}, []int{12, 4, 1})
	if !ok || sp.n != 24 {
		t.Fatalf("coalesce: ok=%v n=%d", ok, sp.n)
	}
	// dims 1 and 2 merge for all (4*1 == 4, 0*4 == 0); dim 0 cannot merge for operand 1.
	if len(sp.shape) != 2 || sp.shape[0] != 12 || sp.shape[1] != 2 {
		t.Fatalf("shape %v, want [12 2] innermost first", sp.shape)
	}
	if sp.st[1][0] != 0 || sp.st[1][1] != 1 || sp.st[0][0] != 1 || sp.st[0][1] != 12 {
		t.Fatalf("strides %v", sp.st)
	}
	// Size-1 dims vanish; fully contiguous becomes rank 1.
	sp, _ = coalesce([]int{1, 5, 1, 6}, []int{30, 6, 6, 1})
	if len(sp.shape) != 1 || sp.shape[0] != 30 {
		t.Fatalf("shape %v, want [30]", sp.shape)
	}
	// Rank 9 with no mergeable dims is refused.
	sh := []int{2, 2, 2, 2, 2, 2, 2, 2, 2}
	st := []int{1, 2, 4, 8, 16, 32, 64, 128, 256} // reversed: nothing merges
	if _, ok := coalesce(sh, st); ok {
		t.Fatal("rank-9 space accepted")
	}
	args := ewArgs(sp, []uint64{1}, []int64{1}, 0, 0, 0, 0)
	if len(args) != 54*8 {
		t.Fatalf("EwArgs is %d bytes, want %d", len(args), 54*8)
	}
}
