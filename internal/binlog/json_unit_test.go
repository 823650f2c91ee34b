package binlog

import (
	"errors"
	"testing"
)

// TestJSONExprUnit decodes hand-built binary JSON (MySQL's json_binary.h
// format) and DECIMALs; TestJSONExact checks the same against a server.
func TestJSONExprUnit(t *testing.T) {
	cases := []struct {
		doc  []byte
		want string
	}{
		// [1, "a"]: small array, an inlined int16 and a string at offset 10.
		{[]byte{0x02, 0x02, 0x00, 0x0c, 0x00, 0x05, 0x01, 0x00, 0x0c, 0x0a, 0x00, 0x01, 'a'}, "JSON_ARRAY(1, _utf8mb4 X'61')"},
		// {"k": true}: small object, key entry (offset 11, length 1), inlined literal.
		{[]byte{0x00, 0x01, 0x00, 0x0c, 0x00, 0x0b, 0x00, 0x01, 0x00, 0x04, 0x01, 0x00, 'k'}, "JSON_OBJECT(_utf8mb4 X'6b', CAST('true' AS JSON))"},
		// a scalar uint16 document
		{[]byte{0x06, 0x07, 0x00}, "JSON_EXTRACT(JSON_ARRAY(CAST(7 AS UNSIGNED)), '$[0]')"},
		// a scalar double 1.0
		{[]byte{0x0b, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, "JSON_EXTRACT(JSON_ARRAY(1e+00), '$[0]')"},
		// DECIMAL(5,2) -123.45 as an opaque scalar
		{[]byte{0x0f, 0xf6, 0x05, 0x05, 0x02, 0x7f, 0x84, 0xd2}, "JSON_EXTRACT(JSON_ARRAY(CAST('-123.45' AS DECIMAL(5,2))), '$[0]')"},
		{nil, "CAST('null' AS JSON)"},
	}
	for _, c := range cases {
		got, err := JSONExpr(c.doc)
		if err != nil || string(got) != c.want {
			t.Errorf("JSONExpr(% x) = %q, %v; want %q", c.doc, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{
		{0x02, 0x05, 0x00, 0x0c, 0x00},       // truncated array
		{0x0f, 0x0f, 0x02, 0x00, 0xff},       // an opaque binary string
		{0x0c, 0x05, 'a'},                    // string shorter than its length
		{0x0b, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, // +Inf
	} {
		if _, err := JSONExpr(bad); !errors.Is(err, ErrJSONValue) {
			t.Errorf("JSONExpr(% x): err %v, want ErrJSONValue", bad, err)
		}
	}
}

func TestDecodeDecimalUnit(t *testing.T) {
	for _, c := range []struct {
		b          []byte
		prec, frac int
		want       string
	}{
		{[]byte{0x80, 0x7b, 0x2d}, 5, 2, "123.45"},
		{[]byte{0x7f, 0x84, 0xd2}, 5, 2, "-123.45"},
		{[]byte{0x80, 0x00, 0x00, 0x00, 0x00, 0x00}, 10, 0, "0"},
		{[]byte{0x80, 0x05}, 4, 4, "0.0005"},
	} {
		got, err := decodeDecimal(c.b, c.prec, c.frac)
		if err != nil || got != c.want {
			t.Errorf("decodeDecimal(% x, %d, %d) = %q, %v; want %q", c.b, c.prec, c.frac, got, err, c.want)
		}
	}
}
