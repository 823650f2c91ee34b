#!/usr/bin/env bash
# fetch-flavor.sh FLAVOR: download a database server that is not installed on
# this machine from Debian's newer suites, unpack it into a cache outside the
# repository and write wrapper scripts that run its binaries through the
# unpacked dynamic loader (nothing is installed system-wide).
#
#   mariadb-11.8   mariadb-server-core + mariadb-client-core from trixie
#   mysql-9.7      mysql-server-core + mysql-client-core from sid
#   mariadb-10.11  the installed package (nothing to fetch; prints its dir)
#
# Prints the flavor's base directory on success (its bin/ and sbin/ hold the
# wrappers). Already fetched flavors are not fetched again; FORCE=1 refetches.
#
# Cache: $RECAST_FLAVOR_CACHE, else $XDG_CACHE_HOME/recast/flavors, else
# ~/.cache/recast/flavors. Layout: CACHE/FLAVOR/{root,bin,sbin,share,lib,VERSION}.
#
# apt runs with a private state (sources, lists, cache all under a work dir);
# the machine's apt configuration is only read, to find the Debian mirror.
set -euo pipefail

die() { echo "fetch-flavor: $*" >&2; exit 1; }

flavor=${1:-}
case "$flavor" in
mariadb-10.11)
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || die "mariadb-10.11 is the installed package: install mariadb-server"
	echo /usr
	exit 0
	;;
mariadb-11.8)
	suite=trixie
	pkgs=(mariadb-server-core mariadb-client-core)
	# Plugins (metadata_lock_info, ...) are in mariadb-server, whose own
	# dependencies (galera, debconf, ...) the binaries do not need.
	extra=(mariadb-server)
	want_version='^1:11\.8\.'
	;;
mysql-9.7)
	suite=sid
	pkgs=(mysql-server-core mysql-client-core)
	extra=()
	want_version='^9\.7\.'
	;;
*) die "usage: fetch-flavor.sh mariadb-10.11|mariadb-11.8|mysql-9.7 (got '$flavor')" ;;
esac

cache=${RECAST_FLAVOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/recast/flavors}
mkdir -p "$cache"
dest=$cache/$flavor

# One fetch at a time per flavor (test binaries start in parallel).
exec 9>"$cache/$flavor.lock"
flock 9

if [ "${FORCE:-0}" != 1 ] && [ -f "$dest/VERSION" ]; then
	echo "$dest"
	exit 0
fi

# --- the mirror, read from the machine's apt sources --------------------------
mirror_uri() {
	local codename f uri
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	# deb822 .sources: the first stanza of type deb whose Suites hold the
	# machine's own codename (not -security/-updates).
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk -v cn="$codename" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^[Tt]ypes:/) { types = $i; sub(/^[^:]*:[ \t]*/, "", types) }
					if ($i ~ /^URIs:/) { uris = $i; sub(/^[^:]*:[ \t]*/, "", uris) }
					if ($i ~ /^Suites:/) { suites = $i; sub(/^[^:]*:[ \t]*/, "", suites) }
				}
				if (types !~ /(^|[ \t])deb([ \t]|$)/) next
				n = split(suites, s, /[ \t]+/)
				for (j = 1; j <= n; j++) if (s[j] == cn) { split(uris, u, /[ \t]+/); print u[1]; exit }
			}' "$f")
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	# one-line format: deb [opts] URI SUITE COMPONENTS...
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(sed -e 's/\[[^]]*\]//' "$f" | awk -v cn="$codename" '$1 == "deb" && $3 == cn { print $2; exit }')
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
}
uri=$(mirror_uri)
[ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/* (looked for a 'deb' entry of this machine's own suite)"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring missing (package debian-archive-keyring)"

work=$(mktemp -d "$cache/.work-$flavor.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb [signed-by=$keyring] $uri $suite main" >"$work/sources.list"
apt_opts=(
	-o "Dir::Etc::sourcelist=$work/sources.list"
	-o "Dir::Etc::sourceparts=-"
	-o "Dir::State::Lists=$work/lists"
	-o "Dir::Cache=$work/cache"
	-o "Dir::State::status=/dev/null" # resolve as if nothing were installed: the private loader sees only what we unpack
	-o "Acquire::Languages=none"
	-o "APT::Get::AllowUnauthenticated=false"
)
echo "fetch-flavor: $flavor: apt-get update ($suite from $uri, private state)" >&2
apt-get -q "${apt_opts[@]}" update >"$work/update.log" 2>&1 || { cat "$work/update.log" >&2; die "apt-get update of $suite failed"; }

ver=$(apt-cache "${apt_opts[@]}" show --no-all-versions "${pkgs[0]}" 2>/dev/null | awk '/^Version:/ { print $2; exit }')
[ -n "$ver" ] || die "${pkgs[0]} not found in $suite"
echo "$ver" | grep -Eq "$want_version" || die "${pkgs[0]} in $suite is version $ver, not the expected $flavor"

# The packages' own dependency closure (sid renames libraries: never a frozen
# list). Perl is a dependency of the packages' helper scripts, not of the
# binaries, so it is left out; the ld.so check below proves nothing is missing.
mapfile -t all < <(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances "${pkgs[@]}" |
	grep -v '^[ <]' | grep -Ev '^(perl|perl-base|perl-modules-.*|libperl.*|debconf.*)$' | sort -u)
[ "${#all[@]}" -gt 0 ] || die "could not resolve the dependencies of ${pkgs[*]}"
echo "fetch-flavor: $flavor $ver: downloading ${#all[@]} packages" >&2
(cd "$work/debs" && apt-get -q "${apt_opts[@]}" download "${all[@]}" "${extra[@]}" >"$work/download.log" 2>&1) ||
	{ cat "$work/download.log" >&2; die "apt-get download failed"; }

new=$work/out
root=$new/root
mkdir -p "$root" "$new/bin" "$new/sbin"
for deb in "$work"/debs/*.deb; do
	dpkg -x "$deb" "$root"
done
ldso=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
[ -e "$ldso" ] || die "no dynamic loader in the unpacked libc6 ($ldso)"
libpath=$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu

# wrap NAME REL [EXTRA_ARGS...]: CACHE/FLAVOR/NAME runs root/REL through the
# unpacked loader. EXTRA_ARGS (where $r stands for the unpacked root at run
# time) are appended after the caller's: servers insist on --no-defaults first.
# Paths are relative to the wrapper, so the cache dir may move.
wrap() {
	local name=$1 rel=$2 a
	shift 2
	[ -f "$root/$rel" ] || die "missing $root/$rel"
	{
		echo '#!/bin/sh'
		echo 'r=$(cd "$(dirname "$0")/.." && pwd)/root'
		printf 'exec "$r/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$r/lib/x86_64-linux-gnu:$r/usr/lib/x86_64-linux-gnu" "$r/%s" "$@"' "$rel"
		for a in "$@"; do printf ' "%s"' "$a"; done
		echo
	} >"$new/$name"
	chmod +x "$new/$name"
	local out
	if ! out=$("$ldso" --library-path "$libpath" --list "$root/$rel" 2>&1) || echo "$out" | grep -q 'not found'; then
		echo "$out" >&2
		die "$rel: shared libraries missing"
	fi
}

case "$flavor" in
mariadb-11.8)
	# lc-messages-dir, plugin-dir: a server run through ld.so cannot find
	# its share dir from its own path.
	wrap sbin/mariadbd usr/sbin/mariadbd '--lc-messages-dir=$r/usr/share/mariadb' '--plugin-dir=$r/usr/lib/mysql/plugin'
	ln -s mariadbd "$new/sbin/mysqld"
	wrap bin/my_print_defaults usr/bin/my_print_defaults
	wrap bin/resolveip usr/bin/resolveip
	wrap bin/mariadb usr/bin/mariadb
	ln -s mariadb "$new/bin/mysql"
	# mariadb-install-db is a shell script: it finds the server and the
	# tools under --basedir (this dir), the SQL under basedir/share.
	cp "$root/usr/bin/mariadb-install-db" "$new/bin/mariadb-install-db"
	ln -s mariadb-install-db "$new/bin/mysql_install_db"
	ln -s root/usr/share "$new/share"
	;;
mysql-9.7)
	wrap sbin/mysqld usr/sbin/mysqld '--lc-messages-dir=$r/usr/share/mysql' '--plugin-dir=$r/usr/lib/mysql/plugin' '--character-sets-dir=$r/usr/share/mysql/charsets'
	wrap bin/mysql usr/bin/mysql
	wrap bin/mysqladmin usr/bin/mysqladmin
	ln -s root/usr/share "$new/share"
	;;
esac

"$new/sbin/$([ "$flavor" = mysql-9.7 ] && echo mysqld || echo mariadbd)" --version >&2 ||
	die "the unpacked server does not run"
echo "$ver" >"$new/VERSION"

rm -rf "$dest.old"
[ -e "$dest" ] && mv "$dest" "$dest.old"
mv "$new" "$dest"
rm -rf "$dest.old"
echo "fetch-flavor: $flavor $ver ready in $dest" >&2
echo "$dest"
