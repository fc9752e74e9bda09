#!/usr/bin/env bash
# install.sh: build sluice and install it with its Slurm command links.
#
# Everything is checked before anything changes: a run either installs completely or
# changes nothing. What was installed is recorded in PREFIX/share/sluice/install-manifest,
# and --uninstall removes exactly that (only entries that are still sluice's).
set -euo pipefail

# The Slurm commands linked to the binary (keep in step with cli::LINKED_COMMANDS;
# tests/install_test.sh checks that they agree).
COMMANDS=(sbatch srun salloc squeue scancel sinfo scontrol sacct sstat sprio sdiag sshare sacctmgr sreport seff)

PROG=${0##*/}
SRC_DIR=$(cd "$(dirname "$0")" && pwd)
MANIFEST_HEADER='# sluice install manifest v1: written by install.sh, read by install.sh --uninstall'

usage() {
	cat <<EOF
Usage: $PROG [--prefix DIR] [--systemd] [--force] [--uninstall] [--help]

Builds sluice (cargo build --release, with --locked when Cargo.lock exists), installs it
as PREFIX/bin/sluice and links these commands to it in PREFIX/bin:
  ${COMMANDS[*]}
and installs their man pages (PREFIX/share/man/man1) and bash, zsh and fish completions
(PREFIX/share/bash-completion/completions, PREFIX/share/zsh/site-functions,
PREFIX/share/fish/vendor_completions.d) from the source tree's man/ and completions/.

Options:
  --prefix DIR   install under DIR (default: /usr/local as root, ~/.local otherwise)
  --systemd      also install a systemd unit that runs the controller: as root the
                 system unit sluice-controller.service (for /etc/sluice/sluice.toml),
                 otherwise the user unit sluice.service (personal mode); enable it
                 with the systemctl command printed at the end
  --force        replace existing files or links in the way that are not sluice's
  --uninstall    remove what the last install recorded in
                 PREFIX/share/sluice/install-manifest, then the manifest itself;
                 anything changed since is left in place
  -h, --help     show this help

Environment:
  SLUICE_BIN=PATH  install this already-built binary instead of building one
                   (e.g. build as yourself, then: sudo SLUICE_BIN=target/release/sluice $PROG)
  SLUICE_SYSTEMD_DIR=DIR  where --systemd puts the unit (default /etc/systemd/system
                   as root, ~/.config/systemd/user otherwise)

Nothing is changed when a check fails: existing files that are not sluice's are named
and the script exits non-zero unless --force is given.
EOF
}

die() {
	echo "$PROG: error: $*" >&2
	exit 1
}
note() { echo "$PROG: $*"; }

prefix=''
systemd=0
force=0
uninstall=0
while [ $# -gt 0 ]; do
	case $1 in
	--prefix)
		[ $# -ge 2 ] || die "--prefix needs a directory"
		prefix=$2
		shift 2
		;;
	--prefix=*)
		prefix=${1#--prefix=}
		shift
		;;
	--force) force=1; shift ;;
	--systemd) systemd=1; shift ;;
	--uninstall) uninstall=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$PROG: error: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
done

if [ -z "$prefix" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		prefix=/usr/local
	else
		[ -n "${HOME:-}" ] || die "HOME is not set; give --prefix"
		prefix=$HOME/.local
	fi
fi
[ -n "$prefix" ] || die "--prefix must not be empty"
case $prefix in
*$'\n'* | *$'\t'*) die "--prefix must not contain tabs or newlines" ;;
esac
case $prefix in
/*) ;;
*) prefix=$(pwd)/$prefix ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/

BIN_DIR=$prefix/bin
SHARE_DIR=$prefix/share/sluice
MANIFEST=$SHARE_DIR/install-manifest
BIN=$BIN_DIR/sluice

# The systemd unit (--systemd): the controller as a system service as root, or as
# the user's own service (personal mode) otherwise.
if [ "$(id -u)" -eq 0 ]; then
	UNIT_DIR=${SLUICE_SYSTEMD_DIR:-/etc/systemd/system}
	UNIT_NAME=sluice-controller.service
	SYSTEMCTL='systemctl'
else
	UNIT_DIR=${SLUICE_SYSTEMD_DIR:-${XDG_CONFIG_HOME:-${HOME:-}/.config}/systemd/user}
	UNIT_NAME=sluice.service
	SYSTEMCTL='systemctl --user'
fi
UNIT=$UNIT_DIR/$UNIT_NAME

# unit_text: the unit file for the installed binary.
unit_text() {
	if [ "$(id -u)" -eq 0 ]; then
		cat <<EOF
# Written by sluice's install.sh --systemd.
[Unit]
Description=sluice controller (Slurm-compatible workload manager)
After=network-online.target
Wants=network-online.target
ConditionPathExists=/etc/sluice/sluice.toml

[Service]
Type=simple
ExecStart=$BIN controller --foreground
Restart=on-failure
# Jobs' step daemons outlive a controller restart: stop only the controller.
KillMode=process
# sluice makes its own job cgroups below the service's.
Delegate=yes

[Install]
WantedBy=multi-user.target
EOF
	else
		cat <<EOF
# Written by sluice's install.sh --systemd.
[Unit]
Description=sluice personal controller (Slurm-compatible workload manager)

[Service]
Type=simple
ExecStart=$BIN controller --foreground
Restart=on-failure
KillMode=process

[Install]
WantedBy=default.target
EOF
	fi
}

# checksum FILE: a content fingerprint with POSIX cksum.
checksum() {
	local out
	out=$(cksum <"$1")
	echo "${out%% *}-$(wc -c <"$1" | tr -d ' ')"
}

# manifest_entries: the manifest's entries as "kind<TAB>path<TAB>extra" lines.
manifest_entries() {
	[ -f "$MANIFEST" ] || return 0
	head -n 1 "$MANIFEST" | grep -qxF "$MANIFEST_HEADER" || return 0
	grep -v '^#' "$MANIFEST" | grep -v '^prefix	' || true
}

# recorded_sum PATH: the checksum the manifest recorded for a file, if any.
recorded_sum() {
	local kind path extra
	while IFS=$'\t' read -r kind path extra; do
		if [ "$kind" = file ] && [ "$path" = "$1" ]; then
			echo "$extra"
			return 0
		fi
	done < <(manifest_entries)
	return 0
}

# The man pages and shell completions generated from the commands' definitions
# (man/, completions/ in the source tree; cli::docs), as "source<TAB>destination" lines.
MAN_DIR=$prefix/share/man/man1
BASH_DIR=$prefix/share/bash-completion/completions
ZSH_DIR=$prefix/share/zsh/site-functions
FISH_DIR=$prefix/share/fish/vendor_completions.d
DOC_DIRS=("$prefix/share/man" "$MAN_DIR" "$prefix/share/bash-completion" "$BASH_DIR"
	"$prefix/share/zsh" "$ZSH_DIR" "$prefix/share/fish" "$FISH_DIR")
DOC_FILES=()
for f in "$SRC_DIR"/man/*.1; do [ -f "$f" ] && DOC_FILES+=("$f	$MAN_DIR/${f##*/}"); done
for f in "$SRC_DIR"/completions/bash/*; do [ -f "$f" ] && DOC_FILES+=("$f	$BASH_DIR/${f##*/}"); done
for f in "$SRC_DIR"/completions/zsh/_*; do [ -f "$f" ] && DOC_FILES+=("$f	$ZSH_DIR/${f##*/}"); done
for f in "$SRC_DIR"/completions/fish/*.fish; do [ -f "$f" ] && DOC_FILES+=("$f	$FISH_DIR/${f##*/}"); done

# is_doc_dest PATH: PATH is where this install puts a man page or completion.
is_doc_dest() {
	local e
	for e in ${DOC_FILES[@]+"${DOC_FILES[@]}"}; do [ "${e#*	}" = "$1" ] && return 0; done
	return 1
}

# in_doc_dir PATH: PATH lies in one of the man page or completion directories.
in_doc_dir() {
	case ${1%/*} in
	"$MAN_DIR" | "$BASH_DIR" | "$ZSH_DIR" | "$FISH_DIR") return 0 ;;
	esac
	return 1
}

# is_our_link PATH: PATH is a symlink to the sluice binary next to it.
is_our_link() {
	[ -L "$1" ] && [ "$(readlink "$1")" = sluice ]
}

# ------------------------------------------------------------------ uninstall
if [ "$uninstall" -eq 1 ]; then
	[ -f "$MANIFEST" ] || die "no sluice installation recorded under $prefix ($MANIFEST is missing)"
	head -n 1 "$MANIFEST" | grep -qxF "$MANIFEST_HEADER" ||
		die "$MANIFEST is not a sluice install manifest; not touching anything"
	dirs=()
	kept=0
	while IFS=$'\t' read -r kind path extra; do
		case $kind in
		link)
			if [ -L "$path" ] && [ "$(readlink "$path")" = "$extra" ]; then
				rm -f -- "$path"
				note "removed $path"
			elif [ -e "$path" ] || [ -L "$path" ]; then
				note "kept $path: it changed since install (no longer a link to $extra)"
				kept=1
			fi
			;;
		file)
			if [ -f "$path" ] && [ ! -L "$path" ] && [ "$(checksum "$path")" = "$extra" ]; then
				rm -f -- "$path"
				note "removed $path"
			elif [ -e "$path" ] || [ -L "$path" ]; then
				note "kept $path: it changed since install"
				kept=1
			fi
			;;
		dir) dirs+=("$path") ;;
		esac
	done < <(manifest_entries)
	rm -f -- "$MANIFEST"
	note "removed $MANIFEST"
	# Directories the install created, deepest first, and only when empty.
	for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
		d=${dirs[i]}
		if [ -d "$d" ] && rmdir -- "$d" 2>/dev/null; then
			note "removed $d"
		fi
	done
	[ "$kept" -eq 0 ] || note "some files were kept because they changed after the install"
	exit 0
fi

# ------------------------------------------------------------------ build
if [ -n "${SLUICE_BIN:-}" ]; then
	src_bin=$SLUICE_BIN
	[ -f "$src_bin" ] && [ -x "$src_bin" ] || die "SLUICE_BIN=$src_bin is not an executable file"
else
	command -v cargo >/dev/null 2>&1 ||
		die "cargo not found: install Rust (https://rustup.rs) or set SLUICE_BIN to a built binary"
	locked=()
	[ -f "$SRC_DIR/Cargo.lock" ] && locked=(--locked)
	note "building: cargo build --release ${locked[*]:-}"
	(cd "$SRC_DIR" && cargo build --release ${locked[@]+"${locked[@]}"}) || die "cargo build failed"
	src_bin=${CARGO_TARGET_DIR:-$SRC_DIR/target}/release/sluice
	case $src_bin in /*) ;; *) src_bin=$SRC_DIR/$src_bin ;; esac
	[ -x "$src_bin" ] || die "build produced no binary at $src_bin"
fi

# ------------------------------------------------------------------ checks
# Nothing below this section's end changes anything until every check has passed.
problems=()
forceable=0 # some problem would go away with --force
replaced=()

# The binary: ours when the manifest recorded it unchanged, or it already is this build.
if [ -e "$BIN" ] || [ -L "$BIN" ]; then
	if [ -d "$BIN" ] && [ ! -L "$BIN" ]; then
		problems+=("$BIN is a directory")
	elif [ -f "$BIN" ] && [ ! -L "$BIN" ] &&
		{ [ "$(checksum "$BIN")" = "$(recorded_sum "$BIN")" ] || cmp -s "$BIN" "$src_bin"; }; then
		:
	elif [ "$force" -eq 1 ]; then
		replaced+=("$BIN")
	else
		problems+=("$BIN exists and was not installed by this script")
		forceable=1
	fi
fi

for cmd in "${COMMANDS[@]}"; do
	link=$BIN_DIR/$cmd
	if [ -e "$link" ] || [ -L "$link" ]; then
		if [ -d "$link" ] && [ ! -L "$link" ]; then
			problems+=("$link is a directory")
		elif is_our_link "$link"; then
			:
		elif [ "$force" -eq 1 ]; then
			replaced+=("$link")
		else
			problems+=("$link exists and is not a link to sluice (another Slurm installed?)")
			forceable=1
		fi
	fi
done

# Man pages and completions: ours when recorded unchanged, or already the same text.
for e in ${DOC_FILES[@]+"${DOC_FILES[@]}"}; do
	src=${e%%	*}
	dest=${e#*	}
	[ -e "$dest" ] || [ -L "$dest" ] || continue
	if [ -f "$dest" ] && [ ! -L "$dest" ] &&
		{ cmp -s "$dest" "$src" || [ "$(checksum "$dest")" = "$(recorded_sum "$dest")" ]; }; then
		:
	elif [ "$force" -eq 1 ] && [ ! -d "$dest" ]; then
		replaced+=("$dest")
	else
		problems+=("$dest exists and was not installed by this script")
		forceable=1
	fi
done

if [ "$systemd" -eq 1 ] && { [ -e "$UNIT" ] || [ -L "$UNIT" ]; }; then
	if [ -f "$UNIT" ] && [ ! -L "$UNIT" ] &&
		{ [ "$(checksum "$UNIT")" = "$(recorded_sum "$UNIT")" ] || cmp -s "$UNIT" <(unit_text); }; then
		:
	elif [ "$force" -eq 1 ] && [ ! -d "$UNIT" ]; then
		replaced+=("$UNIT")
	else
		problems+=("$UNIT exists and was not installed by this script")
		forceable=1
	fi
fi

if [ -e "$MANIFEST" ] && ! head -n 1 "$MANIFEST" | grep -qxF "$MANIFEST_HEADER"; then
	if [ "$force" -eq 1 ]; then
		replaced+=("$MANIFEST")
	else
		problems+=("$MANIFEST exists and is not a sluice install manifest")
		forceable=1
	fi
fi

# Directories to create, parents first, and whether we may write where they go.
new_dirs=()
for d in "$prefix" "$BIN_DIR" "$prefix/share" "$SHARE_DIR" ${DOC_FILES[@]+"${DOC_DIRS[@]}"}; do
	if [ -e "$d" ] || [ -L "$d" ]; then
		[ -d "$d" ] || problems+=("$d exists and is not a directory")
	else
		new_dirs+=("$d")
	fi
done
check_dirs=("$BIN_DIR" "$SHARE_DIR" ${DOC_FILES[@]+"$MAN_DIR" "$BASH_DIR" "$ZSH_DIR" "$FISH_DIR"})
unit_dirs=()
if [ "$systemd" -eq 1 ]; then
	case $UNIT_DIR in
	/*)
		check_dirs+=("$UNIT_DIR")
		a=$UNIT_DIR
		while [ ! -e "$a" ] && [ "$a" != / ]; do
			unit_dirs=("$a" ${unit_dirs[@]+"${unit_dirs[@]}"})
			a=$(dirname "$a")
		done
		[ -d "$a" ] || problems+=("$a exists and is not a directory")
		;;
	*) problems+=("the unit directory '$UNIT_DIR' is not absolute (set HOME or SLUICE_SYSTEMD_DIR)") ;;
	esac
fi
unwritable=''
for d in "${check_dirs[@]}"; do
	a=$d
	while [ ! -e "$a" ] && [ "$a" != / ]; do a=$(dirname "$a"); done
	if [ -d "$a" ] && [ ! -w "$a" ] && [ "$a" != "$unwritable" ]; then
		problems+=("cannot write to $a (run as root, or choose another --prefix)")
		unwritable=$a
	fi
done

if [ ${#problems[@]} -gt 0 ]; then
	echo "$PROG: nothing was changed:" >&2
	for p in "${problems[@]}"; do echo "  $p" >&2; done
	if [ "$force" -eq 0 ] && [ "$forceable" -eq 1 ]; then
		echo "$PROG: use --force to replace files that are not sluice's" >&2
	fi
	exit 1
fi

# ------------------------------------------------------------------ install
for f in ${replaced[@]+"${replaced[@]}"}; do note "replacing $f (--force)"; done

# Entries of an earlier install that this one does not make again, and still are ours.
stale=()
while IFS=$'\t' read -r kind path extra; do
	case $kind in
	link)
		keep=0
		for cmd in "${COMMANDS[@]}"; do [ "$path" = "$BIN_DIR/$cmd" ] && keep=1; done
		if [ "$keep" -eq 0 ] && [ -L "$path" ] && [ "$(readlink "$path")" = "$extra" ]; then
			stale+=("$path")
		fi
		;;
	file)
		# A man page or completion no longer generated, unchanged since.
		if in_doc_dir "$path" && ! is_doc_dest "$path" && [ -f "$path" ] &&
			[ "$(checksum "$path")" = "$extra" ]; then
			stale+=("$path")
		fi
		;;
	esac
done < <(manifest_entries)
# Directories an earlier install created stay recorded so that uninstall removes them.
old_dirs=()
while IFS=$'\t' read -r kind path extra; do
	[ "$kind" = dir ] && old_dirs+=("$path")
done < <(manifest_entries)

for d in ${new_dirs[@]+"${new_dirs[@]}"}; do mkdir -- "$d"; done
for d in ${unit_dirs[@]+"${unit_dirs[@]}"}; do mkdir -- "$d"; done

tmp=$(mktemp "$BIN_DIR/.sluice.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cp -- "$src_bin" "$tmp"
chmod 755 "$tmp"
mv -f -- "$tmp" "$BIN"
trap - EXIT
note "installed $BIN"

for cmd in "${COMMANDS[@]}"; do
	link=$BIN_DIR/$cmd
	if ! is_our_link "$link"; then
		rm -f -- "$link"
		ln -s sluice "$link"
	fi
done
note "linked ${COMMANDS[*]} -> sluice in $BIN_DIR"

for e in ${DOC_FILES[@]+"${DOC_FILES[@]}"}; do
	dest=${e#*	}
	cp -- "${e%%	*}" "$dest.tmp"
	chmod 644 "$dest.tmp"
	mv -f -- "$dest.tmp" "$dest"
done
[ ${#DOC_FILES[@]} -eq 0 ] ||
	note "installed ${#DOC_FILES[@]} man pages and shell completions under $prefix/share"

if [ "$systemd" -eq 1 ]; then
	unit_text >"$UNIT.tmp"
	mv -f -- "$UNIT.tmp" "$UNIT"
	note "installed $UNIT; start it now and at boot with: $SYSTEMCTL daemon-reload && $SYSTEMCTL enable --now $UNIT_NAME"
fi

for s in ${stale[@]+"${stale[@]}"}; do
	rm -f -- "$s"
	note "removed $s (no longer installed)"
done

{
	echo "$MANIFEST_HEADER"
	printf 'prefix\t%s\n' "$prefix"
	for d in ${old_dirs[@]+"${old_dirs[@]}"}; do printf 'dir\t%s\t\n' "$d"; done
	for d in ${new_dirs[@]+"${new_dirs[@]}"}; do
		dup=0
		for o in ${old_dirs[@]+"${old_dirs[@]}"}; do [ "$o" = "$d" ] && dup=1; done
		[ "$dup" -eq 1 ] || printf 'dir\t%s\t\n' "$d"
	done
	for d in ${unit_dirs[@]+"${unit_dirs[@]}"}; do printf 'dir\t%s\t\n' "$d"; done
	printf 'file\t%s\t%s\n' "$BIN" "$(checksum "$BIN")"
	for e in ${DOC_FILES[@]+"${DOC_FILES[@]}"}; do
		printf 'file\t%s\t%s\n' "${e#*	}" "$(checksum "${e#*	}")"
	done
	if [ "$systemd" -eq 1 ]; then
		printf 'file\t%s\t%s\n' "$UNIT" "$(checksum "$UNIT")"
	else
		# A unit an earlier --systemd install wrote stays recorded while unchanged.
		while IFS=$'\t' read -r kind path extra; do
			if [ "$kind" = file ] && [ "$path" != "$BIN" ] && ! in_doc_dir "$path" && [ -f "$path" ] &&
				[ "$(checksum "$path")" = "$extra" ]; then
				printf 'file\t%s\t%s\n' "$path" "$extra"
			fi
		done < <(manifest_entries)
	fi
	for cmd in "${COMMANDS[@]}"; do printf 'link\t%s\t%s\n' "$BIN_DIR/$cmd" sluice; done
} >"$MANIFEST.tmp"
mv -f -- "$MANIFEST.tmp" "$MANIFEST"
note "recorded the install in $MANIFEST"

case ":${PATH:-}:" in
*":$BIN_DIR:"*) ;;
*) note "note: $BIN_DIR is not in your PATH; add it to use sbatch, squeue, ..." ;;
esac
