package model

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// FuzzDecode checks that Decode never panics, that every error is a
// *FormatError, that Read agrees with Decode, and that accepted inputs
// round-trip: re-encoding and decoding gives the same model, and encoding
// that again gives the same bytes. Each input is also tried with its
// checksums fixed up, so that the fuzzer gets past them into the tables.
func FuzzDecode(f *testing.F) {
	for _, m := range testModels(f) {
		b := encode(f, m)
		f.Add(b)
		for _, cut := range []int{7, HeaderSize - 1, HeaderSize + 5, len(b) - 1} {
			if cut > 0 && cut < len(b) {
				f.Add(slices.Clone(b[:cut]))
			}
		}
		for _, at := range []int{9, 17, HeaderSize, HeaderSize + 4, HeaderSize + 9, len(b) / 2, len(b) - 1} {
			if at < len(b) {
				c := slices.Clone(b)
				c[at] ^= 0x80
				f.Add(c)
				c = slices.Clone(c)
				fixCRC(c)
				f.Add(c)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		if len(b) >= HeaderSize {
			c := slices.Clone(b)
			fixCRC(c)
			checkDecode(t, c)
		}
	})
}

func checkDecode(t *testing.T, b []byte) {
	m, err := Decode(b)
	_, rerr := Read(bytes.NewReader(b), int64(len(b)))
	if (err == nil) != (rerr == nil) {
		t.Fatalf("Decode: %v; Read: %v", err, rerr)
	}
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v is %T, not *FormatError", err, err)
		}
		return
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatalf("decoded model does not encode: %v", err)
	}
	b2 := buf.Bytes()
	m2, err := Decode(b2)
	if err != nil {
		t.Fatalf("re-encoded model does not decode: %v", err)
	}
	if d := diffModels(m, m2); d != "" {
		t.Fatalf("round trip changed the model: %s", d)
	}
	buf.Reset()
	if _, err := m2.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b2, buf.Bytes()) {
		t.Fatal("encoding is not canonical")
	}
}
