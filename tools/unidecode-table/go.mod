// Writes src/flux/unidecode.bin, the transliteration table `slugify`
// (src/flux/resourceset.rs) reads: gosimple/unidecode at the version
// flux-operator v0.59.0 pins (through gosimple/slug v1.15.0).
//
//	cd tools/unidecode-table && go run . ../../src/flux/unidecode.bin
module bootstrap.invalid/tools/unidecode-table

go 1.26.0

require github.com/gosimple/unidecode v1.0.1
