package engine_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/vrun-go/vrun/engine"
	"github.com/vrun-go/vrun/internal/repo"
)

// Every op the engine plans is listed in docs/ops.md.
func TestOpsDocumented(t *testing.T) {
	p, err := repo.Path("docs/ops.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range engine.Ops() {
		if !regexp.MustCompile(`\b` + op + `\b`).Match(doc) {
			t.Errorf("docs/ops.md does not list %s", op)
		}
	}
}
