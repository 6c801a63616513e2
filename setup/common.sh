# shellcheck shell=bash
# setup/common.sh: what every cloud-setup.sh role shares: output, the
# run/dry-run gate for changes, and the OS check. Sourced by cloud-setup.sh
# (which sets PROG), never run on its own.

# ---------------------------------------------------------------- output --

# shellcheck source=scripts/messages.sh
. "$SETUP_DIR/../scripts/messages.sh"
step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
already() { printf '    already %s\n' "$*"; }

# Quote a command for display so it can be pasted back into a shell.
show_cmd() {
    local out="" arg
    for arg in "$@"; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
            out+="$arg "
        else
            out+="'${arg//\'/\'\\\'\'}' "
        fi
    done
    printf '%s' "${out% }"
}

# ------------------------------------------------------- changing things --

DRY_RUN=0
CHANGES=0
SUDO=()
if ((EUID != 0)); then SUDO=(sudo); fi

# run CMD...: every command that changes the system goes through here, so
# --dry-run can print it instead and the final summary can count it.
run() {
    CHANGES=$((CHANGES + 1))
    if ((DRY_RUN)); then
        info "[dry-run] $(show_cmd "$@")"
        return 0
    fi
    info "+ $(show_cmd "$@")"
    "$@"
}

# as_root CMD...: run() with sudo in front unless we are root already.
as_root() {
    if ((${#SUDO[@]})) && ((!DRY_RUN)) && ! command -v sudo >/dev/null 2>&1; then
        die "'$(show_cmd "$@")' needs root: run as root or install sudo"
    fi
    run "${SUDO[@]}" "$@"
}

# write_root_file PATH MODE CONTENT [SHOWN]: install a root-owned config
# file. A dry run prints SHOWN instead of CONTENT when given (CONTENT with
# its secrets masked). Sets FILE_CHANGED=1 when it wrote something, 0 when
# the file was current.
FILE_CHANGED=0
# shellcheck disable=SC2034 # FILE_CHANGED is this function's answer, read by its callers
write_root_file() {
    local path=$1 mode=$2 content=$3 shown=${4-$3}
    FILE_CHANGED=0
    if [[ -f $path ]] && printf '%s\n' "$content" | cmp -s - "$path"; then
        already "up to date: $path"
        return 0
    fi
    FILE_CHANGED=1
    CHANGES=$((CHANGES + 1))
    if ((DRY_RUN)); then
        info "[dry-run] write $path (mode $mode${SUDO[*]:+, via sudo tee}):"
        printf '%s\n' "$shown" | sed 's/^/        | /'
        return 0
    fi
    info "+ write $path"
    if [[ ! -d $(dirname "$path") ]]; then
        "${SUDO[@]}" install -d -m 0755 "$(dirname "$path")"
    fi
    printf '%s\n' "$content" | "${SUDO[@]}" tee "$path" >/dev/null
    "${SUDO[@]}" chmod "$mode" "$path"
}

# ------------------------------------------------------------ platform --

systemd_running() { [[ -d /run/systemd/system ]]; }

OS_ID=""
OS_VERSION=""
detect_os() {
    [[ -r /etc/os-release ]] || die "cannot read /etc/os-release: not a Debian or Ubuntu system?"
    local id like fields
    # A subshell keeps os-release's variables out of this script.
    # shellcheck source=/dev/null
    fields=$(. /etc/os-release && printf '%s\n%s\n%s\n' "${ID:-}" "${ID_LIKE:-}" "${VERSION_ID:-}")
    { read -r id; read -r like; read -r OS_VERSION; } <<<"$fields"
    case $id in
    debian)
        OS_ID=debian
        [[ $OS_VERSION == 12 ]] || warn "written for Debian 12, this is Debian ${OS_VERSION:-unknown}"
        ;;
    ubuntu)
        OS_ID=ubuntu
        [[ $OS_VERSION == 22.04 || $OS_VERSION == 24.04 ]] ||
            warn "written for Ubuntu 22.04/24.04, this is Ubuntu ${OS_VERSION:-unknown}"
        ;;
    *)
        case " $like " in
        *" ubuntu "*) OS_ID=ubuntu ;;
        *" debian "*) OS_ID=debian ;;
        *) die "unsupported system '$id': this script knows Debian and Ubuntu" ;;
        esac
        warn "untested system '$id', treating it as $OS_ID"
        ;;
    esac
    local who="(root)" mode=""
    ((EUID == 0)) || who="(sudo for system changes)"
    ((DRY_RUN)) && mode=", dry run"
    say "System: $OS_ID ${OS_VERSION:-?}, user $(id -un) $who$mode"
}
