package cpu

import (
	"testing"

	"github.com/vrun-go/vrun/internal/backendtest"
)

func TestMemory(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	backendtest.Memory(t, d, 1<<62)
}

func TestMemPool(t *testing.T) {
	d := NewDevice()
	defer d.Close()
	backendtest.MemPool(t, d)
}
