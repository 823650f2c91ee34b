// Package ddl analyses the ALTER body the user gives recast (what follows
// "ALTER TABLE t": "ADD COLUMN c INT, DROP COLUMN d, ..."), maps the columns
// of the old table to the new (ghost) one, and picks the key both share.
//
// recast runs the body verbatim on an empty ghost copy of the table
// ("ALTER TABLE _t_new <GhostStatement>"), so MariaDB itself interprets it;
// this package only needs to know which columns are added, dropped, renamed
// or modified, which keys appear or go, and to refuse what a row copy cannot
// do (RENAME TO, partition management, DISCARD/IMPORT TABLESPACE, ORDER BY,
// ENGINE other than InnoDB, system versioning).
//
// # How the body is read
//
// A small tokenizer (lex.go) splits the body into its comma-separated
// specifications. It cuts ALGORITHM=, LOCK= and a leading WAIT n / NOWAIT out
// of the text (GhostStatement keeps everything else byte for byte), refuses
// several statements and executable comments (/*! */, /*M! */), and refuses
// system versioning, periods and partition management before parsing.
// The body is then parsed as "ALTER TABLE `t` <body>" by the TiDB parser
// (github.com/pingcap/tidb/pkg/parser), which speaks MySQL, not MariaDB.
// Positions in errors are line and column of the text the user gave.
//
// # MariaDB 10.11 syntax and the TiDB parser
//
// Tried against parser v0.0.0-20250421232622-526b2c79173d. Parsed as is:
// ADD/DROP/MODIFY/CHANGE COLUMN with IF [NOT] EXISTS, ADD COLUMN (a, b),
// DROP/ADD INDEX IF [NOT] EXISTS, ADD FOREIGN KEY IF NOT EXISTS,
// RENAME COLUMN/INDEX/KEY, ALTER COLUMN SET/DROP DEFAULT, ALTER INDEX
// [IN]VISIBLE, FORCE, CONVERT TO CHARACTER SET, [DEFAULT] CHARSET/COLLATE,
// ENGINE, ROW_FORMAT (not PAGE), KEY_BLOCK_SIZE, STATS_*, AUTO_INCREMENT,
// COMMENT, CHECK constraints, DROP CONSTRAINT/CHECK, ENABLE/DISABLE KEYS,
// AS (expr) VIRTUAL/STORED, USING BTREE/HASH, DEFAULT NEXT VALUE FOR seq,
// SERIAL, utf8mb3 and the MySQL collations.
//
// The parser rejects these MariaDB forms; the copy handed to it is rewritten
// (rewrite.go) without touching names or key clauses, so they are analysed:
//   - ALGORITHM=NOCOPY (all ALGORITHM=/LOCK= are cut before parsing)
//   - WAIT n / NOWAIT before the specifications
//   - character sets and collations the parser does not know (cp1251, ucs2,
//     utf16, utf32, ..., *_nopad_*, *_uca1400_*) after CHARACTER SET,
//     CHARSET, COLLATE, and _charset'...' introducers
//   - IF [NOT] EXISTS after ADD UNIQUE/PRIMARY KEY/FULLTEXT/CONSTRAINT,
//     DROP FOREIGN KEY, DROP CONSTRAINT, RENAME COLUMN, ALTER COLUMN
//   - column types INET4, INET6, UUID and the spatial types (GEOMETRY,
//     POINT, ...); ADD SPATIAL INDEX
//   - column attributes INVISIBLE, COMPRESSED[=zlib], REF_SYSTEM_ID=n,
//     PERSISTENT (MariaDB's STORED), WITH/WITHOUT SYSTEM VERSIONING
//   - DEFAULT (expression) and DEFAULT f(...) in column definitions (the
//     parser takes only a few functions there)
//   - index attribute IGNORED / NOT IGNORED (ADD ... INDEX, ALTER INDEX)
//   - table options PAGE_COMPRESSED, PAGE_COMPRESSION_LEVEL, ENCRYPTED,
//     ENCRYPTION_KEY_ID, TRANSACTIONAL, PAGE_CHECKSUM, IETF_QUOTES, SEQUENCE
//
// Refused with their own message before parsing (the parser rejects them
// too): ADD/DROP SYSTEM VERSIONING, WITH SYSTEM VERSIONING, AS ROW START/END,
// ADD/DROP PERIOD FOR, CONVERT PARTITION/TABLE, PARTITION BY SYSTEM_TIME.
//
// Still a syntax error ("the ALTER could not be analysed: syntax error at
// line L, column C near ..."), to be run as a plain ALTER TABLE instead:
// ROW_FORMAT=PAGE and other Aria/MyISAM-only options, index option
// CLUSTERING=YES, executable comments (refused by the tokenizer), and
// anything newer than 10.11 (VECTOR columns and indexes). MySQL-only syntax
// (ALTER COLUMN c SET INVISIBLE, SECONDARY_ENGINE_ATTRIBUTE) fails as well;
// MariaDB would reject it anyway. Semantic checks of the parser are not an
// issue: it does not check that columns or indexes exist.
package ddl
