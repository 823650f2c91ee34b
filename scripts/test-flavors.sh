#!/usr/bin/env bash
# test-flavors.sh: go vet, the unit-only packages once, then every package
# whose tests start a sandbox (they import internal/testutil or
# internal/sandbox) once per flavor in RECAST_TEST_FLAVORS (default: all
# three). A flavor that cannot be fetched fails the run with the reason; the
# other flavors still run. GOTESTFLAGS overrides "-race -count=1 -timeout 30m".
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FLAVORS=${RECAST_TEST_FLAVORS:-mariadb-10.11 mariadb-11.8 mysql-9.7}
read -r -a flags <<<"${GOTESTFLAGS:--race -count=1 -timeout 30m}"

$GO vet ./... || exit 1

mapfile -t integ < <($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
	awk '/recast\/internal\/(testutil|sandbox)( |$)/ { print $1 }')
mapfile -t unit < <($GO list ./... | grep -vxF -f <(printf '%s\n' "${integ[@]}"))

failed=()
echo "== unit packages (no server)"
$GO test "${flags[@]}" "${unit[@]}" || failed+=("unit")
for f in $FLAVORS; do
	echo "== $f: integration packages"
	if ! out=$(bash scripts/fetch-flavor.sh "$f" 2>&1); then
		echo "$out" >&2
		echo "FAIL $f: the server could not be fetched (see above); its tests did not run" >&2
		failed+=("$f(fetch)")
		continue
	fi
	start=$(date +%s)
	pkgs=("${integ[@]}")
	RECAST_TEST_FLAVOR=$f $GO test "${flags[@]}" "${pkgs[@]}" || failed+=("$f")
	echo "== $f: $(($(date +%s) - start)) s"
done
if [ "${#failed[@]}" -gt 0 ]; then
	echo "FAIL: ${failed[*]}" >&2
	exit 1
fi
echo "ok: unit + $FLAVORS"
