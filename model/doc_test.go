package model

import (
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDocExample checks that the annotated hex dump of the worked example
// in docs/format.md is exactly what the writer produces for tinyModel.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/format.md")
	if err != nil {
		t.Skip(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- hexdump: tiny -->\n```text\n")
	if !ok {
		t.Fatal("hex dump not found")
	}
	block, _, _ = strings.Cut(block, "```")
	var got []byte
	for i, line := range strings.Split(strings.TrimSpace(block), "\n") {
		data, _, _ := strings.Cut(line, "|")
		fields := strings.Fields(data)
		if len(fields) == 0 {
			continue
		}
		off, err := strconv.ParseInt(fields[0], 16, 64)
		if err != nil || off != int64(len(got)) {
			t.Fatalf("line %d: offset %q, want %04x", i+1, fields[0], len(got))
		}
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		got = append(got, b...)
	}
	want := encode(t, tinyModel(t))
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/format.md example:\n%s\nwriter:\n%s", hex.Dump(got), hex.Dump(want))
	}
	if _, err := Decode(got); err != nil {
		t.Fatal(err)
	}
}
