// Command unidecode-table writes gosimple/unidecode's transliteration of
// every code point of the Basic Multilingual Plane (U+0080..U+FFFF; the
// package leaves ASCII as it is and drops everything above), zlib-compressed:
// for each code point in order, one byte of length and that many bytes of
// ASCII.
package main

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"

	"github.com/gosimple/unidecode"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: unidecode-table OUT")
		os.Exit(2)
	}
	var raw bytes.Buffer
	for cp := rune(0x80); cp <= 0xFFFF; cp++ {
		s := ""
		if cp < 0xD800 || cp > 0xDFFF {
			s = unidecode.Unidecode(string(cp))
		}
		if len(s) > 254 {
			fmt.Fprintf(os.Stderr, "U+%04X: transliteration too long\n", cp)
			os.Exit(1)
		}
		raw.WriteByte(byte(len(s)))
		raw.WriteString(s)
	}
	var out bytes.Buffer
	w, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
	if _, err := w.Write(raw.Bytes()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := w.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], out.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
