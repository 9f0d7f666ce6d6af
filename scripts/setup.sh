#!/usr/bin/env bash
# Installs what lrt needs on Debian 12 (idempotent, quick when everything is present).
# Usage: scripts/setup.sh   (the corpus download arrives with the training tools)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

pkgs=(build-essential cmake ninja-build ccache libeigen3-dev libfmt-dev doctest-dev
      libopenblas-dev pkg-config)
for a in "$@"; do
  echo "setup.sh: unknown argument '$a'" >&2
  exit 2
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=(); elif command -v sudo >/dev/null; then SUDO=(sudo -n); else
    echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; fi
  echo "setup.sh: installing ${missing[*]}"
  # -n: never prompt (no terminal); wait for a concurrent apt/dpkg run instead of failing.
  apt_opts=(-o DPkg::Lock::Timeout=600)
  "${SUDO[@]}" apt-get "${apt_opts[@]}" update -qq
  "${SUDO[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup.sh: all packages present"
fi
