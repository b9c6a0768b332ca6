# shellcheck shell=bash
# gpuraid - common start of the plugin's own test scripts (source me).
# Sets top, plugin (GPURAID_PLUGIN overrides), PY (a python3 with the nbd
# module), the sanitizer environment with an nbdkit wrapper, skips (exit
# 77) when the plugin or the tools are missing, and makes $tmp, a
# temporary directory named after $1.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
plugin=${GPURAID_PLUGIN:-$top/nbdkit-plugin/nbdkit-gpuraid-plugin.so}
PY=/usr/bin/python3
# Sanitizer builds: nbdkit runs with the ASan/UBSan runtimes preloaded.
# shellcheck source=tests/sanitizer-env.sh
. "$top/tests/sanitizer-env.sh"
gr_sanitizer_env "$plugin"
nbdkit () { gr_nbdkit "$@"; }

if [ ! -f "$plugin" ]; then
  echo "$0: skip: $plugin not built"; exit 77
fi
if ! command -v nbdkit >/dev/null || ! $PY -c 'import nbd' 2>/dev/null; then
  echo "$0: skip: needs nbdkit and python3 with the nbd module"; exit 77
fi
tmp=$(mktemp -d "/var/tmp/gpuraid-$1.XXXXXX")
