package ddl

// The rewrites below apply only to the copy of the body handed to the TiDB
// parser; GhostStatement keeps the user's text. Each turns a MariaDB-only form
// into one the parser knows without touching what the analysis reads (column
// names, keys, the kind of each specification); see doc.go.

// specWords are the words that begin a specification other than a table
// option list.
var specWords = map[string]bool{
	"ADD": true, "ALTER": true, "CHANGE": true, "MODIFY": true, "DROP": true, "RENAME": true,
	"CONVERT": true, "ORDER": true, "PARTITION": true, "REMOVE": true, "COALESCE": true,
	"REORGANIZE": true, "TRUNCATE": true, "EXCHANGE": true, "REBUILD": true, "ANALYZE": true,
	"CHECK": true, "OPTIMIZE": true, "REPAIR": true, "DISCARD": true, "IMPORT": true,
	"ENABLE": true, "DISABLE": true, "FORCE": true, "ALGORITHM": true, "LOCK": true,
	"WITH": true, "WITHOUT": true,
}

// addNotColumn are the words after ADD that begin something other than a column.
var addNotColumn = map[string]bool{
	"INDEX": true, "KEY": true, "UNIQUE": true, "PRIMARY": true, "CONSTRAINT": true,
	"FOREIGN": true, "FULLTEXT": true, "SPATIAL": true, "CHECK": true, "PARTITION": true,
	"PERIOD": true, "SYSTEM": true, "VECTOR": true,
}

// mariaTypes maps MariaDB column types the parser lacks to stand-ins.
var mariaTypes = map[string]string{
	"INET4": "BINARY(4)", "INET6": "BINARY(16)", "UUID": "BINARY(16)",
	"GEOMETRY": "BLOB", "POINT": "BLOB", "LINESTRING": "BLOB", "POLYGON": "BLOB",
	"MULTIPOINT": "BLOB", "MULTILINESTRING": "BLOB", "MULTIPOLYGON": "BLOB",
	"GEOMETRYCOLLECTION": "BLOB",
}

// mariaTableOptions are MariaDB table options the parser lacks; they are
// dropped from the parsed copy (each takes one value).
var mariaTableOptions = map[string]bool{
	"PAGE_COMPRESSED": true, "PAGE_COMPRESSION_LEVEL": true, "ENCRYPTED": true,
	"ENCRYPTION_KEY_ID": true, "TRANSACTIONAL": true, "PAGE_CHECKSUM": true,
	"IETF_QUOTES": true, "SEQUENCE": true,
}

// rewriter collects the edits of one item.
type rewriter struct {
	toks  []token
	edits []edit
	gone  map[int]bool // token indexes deleted
}

func (r *rewriter) replace(i int, s string) {
	r.edits = append(r.edits, edit{r.toks[i].start, r.toks[i].end, s})
	if s == "" {
		r.gone[i] = true
	}
}

func (r *rewriter) del(i int) { r.replace(i, "") }

// delOption deletes toks[i] and, after an optional '=', the value following.
func (r *rewriter) delOption(i, hi int) int {
	r.del(i)
	if i+1 < hi && r.toks[i+1].punct('=') {
		i++
		r.del(i)
	}
	if i+1 < hi && r.toks[i+1].kind != tokPunct {
		i++
		r.del(i)
	}
	return i
}

// skipIfExists returns the first index ≥ i in [i, hi) that is not an IF [NOT] EXISTS
// token, or hi.
func skipIfExists(toks []token, i, hi int) int {
	if i < hi && toks[i].is("IF") {
		if i+1 < hi && toks[i+1].is("EXISTS") {
			return i + 2
		}
		if i+2 < hi && toks[i+1].is("NOT") && toks[i+2].is("EXISTS") {
			return i + 3
		}
	}
	return i
}

// sanitize returns the edits that make item it parseable by the TiDB parser,
// and whether they delete every token of it.
func sanitize(toks []token, it item) ([]edit, bool) {
	r := &rewriter{toks: toks, gone: map[int]bool{}}
	lo, hi := it.lo, it.hi
	if lo == hi {
		return nil, false
	}
	r.names(lo, hi)
	for i := lo; i < hi; i++ { // IF [NOT] EXISTS is accepted by the parser in a few places only
		if toks[i].depth == 0 {
			if j := skipIfExists(toks, i, hi); j > i {
				for ; i < j; i++ {
					r.del(i)
				}
				i--
			}
		}
	}
	first := toks[lo].upper()
	switch {
	case first == "ADD":
		i := lo + 1
		if i < hi && toks[i].is("COLUMN") {
			i++
		} else if i < hi && addNotColumn[toks[i].upper()] {
			r.index(i, hi)
			break
		}
		i = skipIfExists(toks, i, hi)
		if i < hi && toks[i].punct('(') { // ADD COLUMN (a INT, b INT)
			start := i + 1
			for j := i + 1; j < hi; j++ {
				closing := toks[j].depth == 0 && toks[j].punct(')')
				if closing || (toks[j].depth == 1 && toks[j].punct(',')) {
					r.columnDef(start+1, j, 1) // skip the column name
					start = j + 1
				}
				if closing {
					break
				}
			}
		} else {
			r.columnDef(i+1, hi, 0)
		}
	case first == "MODIFY" || first == "CHANGE":
		i := lo + 1
		if i < hi && toks[i].is("COLUMN") {
			i++
		}
		i = skipIfExists(toks, i, hi) + 1
		if first == "CHANGE" {
			i++
		}
		r.columnDef(i, hi, 0)
	case first == "ALTER" && lo+1 < hi && (toks[lo+1].is("INDEX") || toks[lo+1].is("KEY")):
		r.index(lo+1, hi)
	case !specWords[first]: // a table option list
		for i := lo; i < hi; i++ {
			if toks[i].depth == 0 && toks[i].kind == tokWord && mariaTableOptions[toks[i].upper()] {
				i = r.delOption(i, hi)
			}
		}
	}
	return r.edits, len(r.gone) == hi-lo
}

// names replaces character set and collation names (MariaDB has many the
// parser rejects: ucs2, utf16, *_nopad_*, *_uca1400_*, ...) and character
// set introducers.
func (r *rewriter) names(lo, hi int) {
	toks := r.toks
	for i := lo; i < hi; i++ {
		t := toks[i]
		repl := ""
		switch {
		case t.is("CHARSET"):
			repl = "utf8mb4"
		case t.is("CHARACTER") && i+1 < hi && toks[i+1].is("SET"):
			repl = "utf8mb4"
			i++
		case t.is("COLLATE"):
			repl = "utf8mb4_bin"
		case t.kind == tokWord && len(t.text) > 1 && t.text[0] == '_' && i+1 < hi &&
			toks[i+1].kind == tokString && toks[i+1].text[0] == '\'':
			if u := t.upper(); u != "_BINARY" && u != "_UTF8MB4" {
				r.replace(i, "_utf8mb4")
			}
			continue
		default:
			continue
		}
		j := i + 1
		if j < hi && toks[j].punct('=') {
			j++
		}
		if j < hi && toks[j].kind != tokPunct && !toks[j].is("DEFAULT") {
			r.replace(j, repl)
			i = j
		}
	}
}

// columnDef rewrites the column definition toks[lo:hi] (its type first)
// whose own tokens are at parenthesis depth d.
func (r *rewriter) columnDef(lo, hi, d int) {
	toks := r.toks
	if lo >= hi {
		return
	}
	if s, ok := mariaTypes[toks[lo].upper()]; ok && toks[lo].kind == tokWord {
		r.replace(lo, s)
	}
	for i := lo + 1; i < hi; i++ {
		t := toks[i]
		if t.depth != d || t.kind != tokWord {
			continue
		}
		switch t.upper() {
		case "INVISIBLE":
			r.del(i)
		case "COMPRESSED", "REF_SYSTEM_ID":
			if i > 0 && toks[i-1].punct('=') {
				continue // ROW_FORMAT=COMPRESSED and the like
			}
			r.del(i)
			if i+1 < hi && toks[i+1].punct('=') {
				r.del(i + 1)
				if i+2 < hi {
					r.del(i + 2)
				}
				i += 2
			}
		case "PERSISTENT":
			r.replace(i, "STORED")
		case "DEFAULT": // DEFAULT (expr) and DEFAULT f(...): the parser takes few of them
			j := i + 1
			if j+1 < hi && toks[j].kind == tokWord && toks[j+1].punct('(') {
				j++
			} else if j >= hi || !toks[j].punct('(') {
				continue
			}
			k := j + 1
			for k < hi && !(toks[k].depth == toks[j].depth && toks[k].punct(')')) {
				k++
			}
			if k < hi {
				r.edits = append(r.edits, edit{toks[i+1].start, toks[k].end, "0"})
				i = k
			}
		case "WITH", "WITHOUT":
			if i+2 < hi && toks[i+1].is("SYSTEM") && toks[i+2].is("VERSIONING") {
				r.del(i)
				r.del(i + 1)
				r.del(i + 2)
				i += 2
			}
		}
	}
}

// index rewrites an index specification starting at toks[lo] (after ADD or
// ALTER): SPATIAL becomes a plain index, IGNORED becomes INVISIBLE.
func (r *rewriter) index(lo, hi int) {
	toks := r.toks
	for i := lo; i < hi; i++ {
		t := toks[i]
		if t.depth != 0 || t.kind != tokWord {
			continue
		}
		switch {
		case t.is("SPATIAL"):
			r.replace(i, "INDEX")
			if i+1 < hi && (toks[i+1].is("INDEX") || toks[i+1].is("KEY")) {
				r.del(i + 1)
				i++
			}
		case t.is("NOT") && i+1 < hi && toks[i+1].is("IGNORED"):
			r.del(i)
			r.replace(i+1, "VISIBLE")
			i++
		case t.is("IGNORED"):
			r.replace(i, "INVISIBLE")
		}
	}
}
