package checksum

// RowExprs returns the per-row CRC expressions the checksum compares, over
// cfg's columns: the source side and the ghost side. Equal values mean equal
// rows (the same expressions the chunk comparison sums), so package verify
// compares single rows with them.
func RowExprs(cfg Config) (source, ghost string) {
	c := &checker{cfg: cfg}
	c.buildExprs()
	return c.srcExpr, c.ghExpr
}
