#!/usr/bin/env bash
# tests/install_test.sh: exercises install.sh against temporary prefixes with an
# already-built binary (no cargo build): fresh install, reinstall, refusing files that are
# not sluice's (and changing nothing), --force, --uninstall (keeping changed entries),
# man pages and completions, and the error paths.
#
# Usage: tests/install_test.sh            (uses $SLUICE_BIN, else target/{debug,release}/sluice)
#        SLUICE_BIN=path tests/install_test.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
INSTALL=$ROOT/install.sh

if [ -z "${SLUICE_BIN:-}" ]; then
	for c in "$ROOT/target/debug/sluice" "$ROOT/target/release/sluice"; do
		if [ -x "$c" ]; then SLUICE_BIN=$c; break; fi
	done
fi
if [ -z "${SLUICE_BIN:-}" ] || [ ! -x "$SLUICE_BIN" ]; then
	echo "install_test: skipped: no built binary (run cargo build, or set SLUICE_BIN)"
	exit 0
fi
# Absolute, because some cases run install.sh from another directory.
case $SLUICE_BIN in /*) ;; *) SLUICE_BIN=$(pwd)/$SLUICE_BIN ;; esac
export SLUICE_BIN

T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install-test.XXXXXX")
trap 'rm -rf -- "$T"' EXIT
COMMANDS=(sbatch srun salloc squeue scancel sinfo scontrol sacct sstat sprio sdiag sshare sacctmgr sreport seff)
failures=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# run_install ARGS...: runs install.sh, leaving its exit code in $rc, output in $out.
run_install() {
	set +e
	out=$("$INSTALL" "$@" 2>&1)
	rc=$?
	set -e
}

# snapshot DIR: every path under DIR with its type, link target and checksum.
snapshot() {
	(cd "$1" && find . -print | LC_ALL=C sort | while read -r p; do
		if [ -L "$p" ]; then
			echo "L $p -> $(readlink "$p")"
		elif [ -f "$p" ]; then
			echo "F $p $(cksum <"$p")"
		else
			echo "D $p"
		fi
	done)
}

# expect_installed PREFIX: the binary, all links and the manifest are in place.
expect_installed() {
	local p=$1 good=1
	cmp -s "$p/bin/sluice" "$SLUICE_BIN" || { fail "$p/bin/sluice is not the binary"; good=0; }
	for c in "${COMMANDS[@]}"; do
		[ -L "$p/bin/$c" ] && [ "$(readlink "$p/bin/$c")" = sluice ] ||
			{ fail "$p/bin/$c is not a link to sluice"; good=0; }
	done
	[ -f "$p/share/sluice/install-manifest" ] || { fail "no manifest under $p"; good=0; }
	return $((1 - good))
}

# --- the command list agrees with the binary's own table
want=$(sed -n '/pub const LINKED_COMMANDS/,/];/p' "$ROOT/src/cli/mod.rs" | grep -o '"[a-z]*"' | tr -d '"' | tr '\n' ' ')
[ "$want" = "${COMMANDS[*]} " ] || fail "COMMANDS differ from cli::LINKED_COMMANDS: '$want'"
grep -q "^COMMANDS=(${COMMANDS[*]})\$" "$INSTALL" || fail "install.sh COMMANDS differ from this test's"

# --- help and bad options
run_install --help
[ "$rc" -eq 0 ] && grep -q SLUICE_BIN <<<"$out" && grep -q -- --uninstall <<<"$out" &&
	ok "--help" || fail "--help: rc=$rc $out"
run_install --bogus
[ "$rc" -eq 2 ] && grep -q "unknown option '--bogus'" <<<"$out" && ok "unknown option" ||
	fail "unknown option: rc=$rc $out"
run_install --prefix
[ "$rc" -ne 0 ] && ok "--prefix without value" || fail "--prefix without value: rc=$rc"

# --- fresh install into a prefix that does not exist yet
P=$T/p1
run_install --prefix "$P"
[ "$rc" -eq 0 ] && expect_installed "$P" && ok "fresh install" || fail "fresh install: rc=$rc $out"
"$P/bin/sluice" --help >/dev/null 2>&1 || true
M=$P/share/sluice/install-manifest
[ "$(grep -c '^link	' "$M")" -eq ${#COMMANDS[@]} ] && grep -q "^file	$P/bin/sluice	" "$M" &&
	ok "manifest lists binary and links" || fail "manifest content: $(cat "$M")"

# --- man pages and shell completions: the source tree's, installed and recorded
docs_ok=1
for c in "${COMMANDS[@]}" sluice; do
	for pair in "man/$c.1 share/man/man1/$c.1" \
		"completions/bash/$c share/bash-completion/completions/$c" \
		"completions/zsh/_$c share/zsh/site-functions/_$c" \
		"completions/fish/$c.fish share/fish/vendor_completions.d/$c.fish"; do
		src=${pair%% *}
		dest=$P/${pair#* }
		if ! cmp -s "$ROOT/$src" "$dest"; then
			fail "$dest is missing or differs from $src"
			docs_ok=0
		elif ! grep -q "^file	$dest	" "$M"; then
			fail "$dest is not in the manifest"
			docs_ok=0
		fi
	done
done
[ "$docs_ok" -eq 1 ] && ok "man pages and completions installed and recorded"
if command -v man >/dev/null 2>&1; then
	MANWIDTH=80 man -l "$P/share/man/man1/sbatch.1" 2>/dev/null | grep -q "sbatch - submit a batch script" &&
		ok "man -l reads the sbatch page" || fail "man -l sbatch.1: $(man -l "$P/share/man/man1/sbatch.1" 2>&1 | head -5)"
fi

# --- a man page that is not sluice's is refused (nothing changed), then --force replaces it
P8=$T/p8
mkdir -p "$P8/share/man/man1"
echo '.TH sbatch 1 "real Slurm"' >"$P8/share/man/man1/sbatch.1"
before=$(snapshot "$P8")
run_install --prefix "$P8"
[ "$rc" -ne 0 ] && grep -qF "$P8/share/man/man1/sbatch.1 exists and was not installed by this script" <<<"$out" &&
	[ "$(snapshot "$P8")" = "$before" ] && ok "a foreign man page is refused, nothing changed" ||
	fail "foreign man page: rc=$rc $out"
run_install --prefix "$P8" --force
[ "$rc" -eq 0 ] && cmp -s "$P8/share/man/man1/sbatch.1" "$ROOT/man/sbatch.1" &&
	ok "--force replaces a foreign man page" || fail "--force man page: rc=$rc $out"
run_install --prefix "$P8" --uninstall
[ "$rc" -eq 0 ] && [ ! -e "$P8/share/man/man1/sbatch.1" ] && [ ! -e "$P8/share/bash-completion" ] &&
	ok "--uninstall removes man pages and completions" || fail "uninstall docs: rc=$rc $(snapshot "$P8")"

# --- reinstall is quiet about its own files and changes nothing else
before=$(snapshot "$P")
run_install --prefix "$P"
[ "$rc" -eq 0 ] && [ "$(snapshot "$P")" = "$before" ] && ok "reinstall is idempotent" ||
	fail "reinstall: rc=$rc $out"

# --- a foreign file and a foreign link: refused, named, nothing changed
rm "$P/bin/squeue"
printf '#!/bin/sh\necho real squeue\n' >"$P/bin/squeue"
ln -sfn /usr/bin/true "$P/bin/sinfo"
before=$(snapshot "$P")
run_install --prefix "$P"
if [ "$rc" -ne 0 ] && grep -q "$P/bin/squeue" <<<"$out" && grep -q "$P/bin/sinfo" <<<"$out" &&
	grep -q -- --force <<<"$out" && [ "$(snapshot "$P")" = "$before" ]; then
	ok "refuses foreign files without changing anything"
else
	fail "refusal: rc=$rc $out"
fi

# --- --force replaces them
run_install --prefix "$P" --force
[ "$rc" -eq 0 ] && expect_installed "$P" && grep -q "replacing $P/bin/squeue" <<<"$out" &&
	ok "--force replaces foreign files" || fail "--force: rc=$rc $out"

# --- a directory in the way is refused even with --force
mkdir -p "$T/p2/bin/srun"
run_install --prefix "$T/p2" --force
[ "$rc" -ne 0 ] && grep -q "$T/p2/bin/srun is a directory" <<<"$out" && [ ! -e "$T/p2/bin/sluice" ] &&
	ok "directory in the way" || fail "directory in the way: rc=$rc $out"

# --- a foreign bin/sluice is refused; an identical one is taken as ours
mkdir -p "$T/p3/bin"
echo 'not sluice' >"$T/p3/bin/sluice"
run_install --prefix "$T/p3"
[ "$rc" -ne 0 ] && grep -q "$T/p3/bin/sluice exists" <<<"$out" && [ ! -e "$T/p3/bin/sbatch" ] &&
	ok "foreign bin/sluice refused" || fail "foreign bin/sluice: rc=$rc $out"
cp "$SLUICE_BIN" "$T/p3/bin/sluice"
run_install --prefix "$T/p3"
[ "$rc" -eq 0 ] && expect_installed "$T/p3" && ok "identical bin/sluice accepted" ||
	fail "identical bin/sluice: rc=$rc $out"

# --- uninstall removes exactly what was installed, keeps what changed since
echo 'keep me' >"$P/bin/unrelated"
rm "$P/bin/scancel"
ln -s elsewhere "$P/bin/scancel"
run_install --prefix "$P" --uninstall
if [ "$rc" -eq 0 ] && [ -L "$P/bin/scancel" ] && [ -f "$P/bin/unrelated" ] &&
	[ ! -e "$P/bin/sluice" ] && [ ! -e "$P/bin/sbatch" ] && [ ! -e "$M" ] &&
	[ ! -e "$P/share" ] && grep -q "kept $P/bin/scancel" <<<"$out"; then
	ok "uninstall keeps changed and unrelated files"
else
	fail "uninstall: rc=$rc $out; left: $(snapshot "$P" | tr '\n' ' ')"
fi

# --- a clean uninstall leaves no trace of the directories it created
run_install --prefix "$T/p4"
run_install --prefix "$T/p4" --uninstall
[ "$rc" -eq 0 ] && [ ! -e "$T/p4" ] && ok "clean uninstall removes created directories" ||
	fail "clean uninstall: rc=$rc $out; left: $(ls -R "$T/p4" 2>&1)"

# --- uninstall of a changed binary keeps it
run_install --prefix "$T/p5"
echo tampered >>"$T/p5/bin/sluice"
run_install --prefix "$T/p5" --uninstall
[ "$rc" -eq 0 ] && [ -f "$T/p5/bin/sluice" ] && [ ! -e "$T/p5/bin/sbatch" ] &&
	ok "uninstall keeps a changed binary" || fail "changed binary: rc=$rc $out"

# --- uninstall without a manifest fails and touches nothing
mkdir -p "$T/p6/bin"
ln -s sluice "$T/p6/bin/sbatch"
run_install --prefix "$T/p6" --uninstall
[ "$rc" -ne 0 ] && grep -q "no sluice installation recorded" <<<"$out" && [ -L "$T/p6/bin/sbatch" ] &&
	ok "uninstall without manifest" || fail "uninstall without manifest: rc=$rc $out"

# --- a file in the manifest's place that is not a manifest is not trusted
mkdir -p "$T/p7/share/sluice"
printf 'link\t%s\tsluice\n' "$T/victim" >"$T/p7/share/sluice/install-manifest"
ln -s sluice "$T/victim"
run_install --prefix "$T/p7" --uninstall
[ "$rc" -ne 0 ] && [ -L "$T/victim" ] && ok "foreign manifest not trusted" ||
	fail "foreign manifest: rc=$rc $out"

# --- relative prefix is made absolute
(cd "$T" && "$INSTALL" --prefix=rel >/dev/null 2>&1) && expect_installed "$T/rel" &&
	grep -q "^prefix	$T/rel\$" "$T/rel/share/sluice/install-manifest" &&
	ok "relative --prefix" || fail "relative --prefix"

# --- as a non-root user: default prefix ~/.local, and an unwritable prefix is refused
# (as root, the checks run through setpriv as uid 65534 when it is available)
as_user=()
if [ "$(id -u)" -eq 0 ]; then
	if command -v setpriv >/dev/null 2>&1; then
		as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
		# The checkout must be readable by that user (it is not under a private /root).
		"${as_user[@]}" test -r "$INSTALL" 2>/dev/null || as_user=()
	fi
fi
if [ "$(id -u)" -ne 0 ] || [ ${#as_user[@]} -gt 0 ]; then
	U=$T/user
	mkdir -p "$U/home" "$U/ro"
	chmod 755 "$T"
	chmod 777 "$U" "$U/home"
	chmod 555 "$U/ro"
	cp "$SLUICE_BIN" "$U/sluice.bin"
	chmod 755 "$U/sluice.bin"
	set +e
	out=$(${as_user[@]+"${as_user[@]}"} env HOME="$U/home" SLUICE_BIN="$U/sluice.bin" "$INSTALL" 2>&1)
	rc=$?
	set -e
	[ "$rc" -eq 0 ] && [ -L "$U/home/.local/bin/sbatch" ] && [ -f "$U/home/.local/share/sluice/install-manifest" ] &&
		ok "default prefix ~/.local" || fail "default prefix: rc=$rc $out"
	set +e
	out=$(${as_user[@]+"${as_user[@]}"} env SLUICE_BIN="$U/sluice.bin" "$INSTALL" --prefix "$U/ro/x" 2>&1)
	rc=$?
	set -e
	[ "$rc" -ne 0 ] && grep -q "cannot write to $U/ro" <<<"$out" && [ ! -e "$U/ro/x" ] &&
		ok "unwritable prefix refused" || fail "unwritable prefix: rc=$rc $out"
else
	echo "skip: non-root checks (running as root without setpriv)"
fi

# --- --systemd: a unit running the installed binary's controller, recorded in the
# manifest, refused over a unit that is not ours, removed by --uninstall
P=$T/sd
SD=$T/units/systemd
if [ "$(id -u)" -eq 0 ]; then unit=$SD/sluice-controller.service; else unit=$SD/sluice.service; fi
SLUICE_SYSTEMD_DIR=$SD run_install --prefix "$P" --systemd
[ "$rc" -eq 0 ] && [ -f "$unit" ] &&
	grep -qxF "ExecStart=$P/bin/sluice controller --foreground" "$unit" &&
	grep -qxF "KillMode=process" "$unit" && grep -qF "enable --now" <<<"$out" &&
	grep -qF "$unit" "$P/share/sluice/install-manifest" &&
	ok "--systemd installs the unit" || fail "--systemd: rc=$rc $out"
SLUICE_SYSTEMD_DIR=$SD run_install --prefix "$P"
[ "$rc" -eq 0 ] && grep -qF "$unit" "$P/share/sluice/install-manifest" &&
	ok "a reinstall without --systemd keeps the unit recorded" || fail "reinstall keeps unit: rc=$rc $out"
SLUICE_SYSTEMD_DIR=$SD run_install --prefix "$P" --uninstall
[ "$rc" -eq 0 ] && [ ! -e "$unit" ] && [ ! -e "$T/units" ] && [ ! -e "$P/bin/sluice" ] &&
	ok "--uninstall removes the unit and its directories" || fail "uninstall unit: rc=$rc $out"
mkdir -p "$SD"
echo "# someone else's" >"$unit"
before=$(snapshot "$T/units")
SLUICE_SYSTEMD_DIR=$SD run_install --prefix "$P" --systemd
[ "$rc" -ne 0 ] && grep -qF "$unit exists and was not installed by this script" <<<"$out" &&
	[ "$(snapshot "$T/units")" = "$before" ] && [ ! -e "$P/bin/sluice" ] &&
	ok "a foreign unit is refused, nothing changed" || fail "foreign unit: rc=$rc $out"

if [ "$failures" -gt 0 ]; then
	echo "install_test: $failures failure(s)" >&2
	exit 1
fi
echo "install_test: all passed"
