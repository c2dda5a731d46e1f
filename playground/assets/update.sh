#!/bin/sh
# Re-fetches the GraphiQL page's assets from the npm registry (npm pack) and
# records what was fetched in VERSIONS. The files are committed: building
# costgate never needs npm; only this script does.
#
# Versions default to the ones gqlgen's own GraphiQL page
# (github.com/99designs/gqlgen/graphql/playground) loads from its CDN; override
# with e.g. GRAPHIQL_VERSION=4.1.2 REACT_VERSION=18.2.0 sh update.sh
# (graphiql 5+ is ES modules only, with no UMD build: it will not work here).
set -eu

GRAPHIQL_VERSION=${GRAPHIQL_VERSION:-4.1.2}
REACT_VERSION=${REACT_VERSION:-18.2.0}

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

versions="$tmp/VERSIONS"
{
	echo "# package version npm-integrity - written by update.sh, do not edit by hand"
} >"$versions"

# fetch NAME VERSION FILE... : npm pack NAME@VERSION, copy FILE... and LICENSE
# from the tarball into $here/NAME/.
fetch() {
	name=$1 version=$2
	shift 2
	mkdir -p "$tmp/$name"
	(cd "$tmp/$name" && npm pack --silent --json "$name@$version" >pack.json)
	integrity=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))[0].integrity' "$tmp/$name/pack.json")
	tar -xzf "$tmp/$name"/*.tgz -C "$tmp/$name"
	rm -rf "${here:?}/$name.new"
	mkdir -p "$here/$name.new"
	for f in "$@" LICENSE; do
		cp "$tmp/$name/package/$f" "$here/$name.new/$(basename "$f")"
	done
	rm -rf "${here:?}/$name"
	mv "$here/$name.new" "$here/$name"
	echo "$name $version $integrity" >>"$versions"
}

fetch graphiql "$GRAPHIQL_VERSION" graphiql.min.js graphiql.min.css
fetch react "$REACT_VERSION" umd/react.production.min.js
fetch react-dom "$REACT_VERSION" umd/react-dom.production.min.js

cp "$versions" "$here/VERSIONS"
cat "$here/VERSIONS"
du -ch "$here"/*/* | tail -1
