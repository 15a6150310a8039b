package cudashim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
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

// sourcesHash is build.sh's hash: for each of kernels/*.cu, *.cuh and
// build.sh in byte order of their names, the name, "\n" and the bytes.
func sourcesHash(t *testing.T) string {
	t.Helper()
	var names []string
	for _, pat := range []string{"*.cu", "*.cuh", "build.sh"} {
		m, err := filepath.Glob(filepath.Join(kernelsDir(), pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			names = append(names, filepath.Base(f))
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

// TestPTXMatchesSources checks that kernels/kernels.ptx.sha256 records the
// hash of the current kernel sources and of the embedded PTX, so the PTX
// cannot drift from the .cu files. It needs no GPU.
func TestPTXMatchesSources(t *testing.T) {
	rec, err := os.ReadFile(filepath.Join(kernelsDir(), "kernels.ptx.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
	if len(lines) != 2 {
		t.Fatalf("kernels.ptx.sha256: want 2 lines, got %q", rec)
	}
	got := sourcesHash(t)
	if want := strings.TrimPrefix(lines[0], "sources "); want != got {
		t.Fatalf("kernel sources changed since kernels.ptx was built (recorded %s, now %s): run cudashim/kernels/build.sh", want, got)
	}
	if PTXIsPlaceholder() {
		if lines[1] != "placeholder" {
			t.Fatalf("kernels.ptx is a placeholder but kernels.ptx.sha256 records %q", lines[1])
		}
		t.Skip("sources hash matches, but the embedded PTX is a placeholder; run cudashim/kernels/build.sh on a machine with nvcc")
	}
	sum := sha256.Sum256([]byte(embeddedPTX))
	if want, got := strings.TrimPrefix(lines[1], "ptx "), hex.EncodeToString(sum[:]); want != got {
		t.Fatalf("kernels.ptx hash %s, recorded %s: rebuild with cudashim/kernels/build.sh", got, want)
	}
	ver, target := PTXVersion(embeddedPTX)
	if ver == "" || target != "sm_75" {
		t.Fatalf("PTX declares .version %q .target %q, want a version and sm_75 (build.sh uses -arch=compute_75)", ver, target)
	}
	for _, n := range kernelEntryNames {
		if !bytes.Contains([]byte(embeddedPTX), []byte(".entry "+n+"(")) {
			t.Errorf("PTX lacks entry %s", n)
		}
	}
	t.Logf("PTX ISA %s, target %s, %d bytes", ver, target, len(embeddedPTX))
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
