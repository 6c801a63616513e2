# shellcheck shell=bash
# setup/apt.sh: installing Debian/Ubuntu packages only when they are
# missing. Sourced by cloud-setup.sh after setup/common.sh (as_root, already).

APT_UPDATED=0

pkg_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [[ $status == "install ok installed" ]]
}

# Print the candidate version apt would install, "(none)" when there is no
# such package, or nothing when the package lists do not know it.
apt_candidate() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || true
    awk '/Candidate:/ { print $2; exit }' <<<"$policy"
}

apt_has_package() {
    local cand
    cand=$(apt_candidate "$1")
    [[ -n $cand && $cand != "(none)" ]]
}

# Fresh cloud images ship without package lists; refresh them once per run,
# and only when something is about to be installed.
apt_update_once() {
    ((APT_UPDATED)) && return 0
    APT_UPDATED=1
    as_root apt-get update
}

# apt_install PKG...: install whichever of the packages are missing.
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        pkg_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        already "installed: $*"
        return 0
    fi
    apt_update_once
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
}
