#!/bin/bash
# usage: ab-rebuild.sh "label|ENV=..|FLAGS" ...   (gpu only unless ACCELS set)
for spec in "$@"; do
  label=${spec%%|*}; rest=${spec#*|}; envs=${rest%%|*}; flags=${rest#*|}
  echo "== $label (env: $envs; flags: $flags)"
  env $envs ACCELS="${ACCELS:-gpu}" GEOMS="${GEOMS:-16:16}" MEMBER_SIZE=${MEMBER_SIZE:-1G} FG=0 WARM=${WARM:-0} FLAGS="$flags" scripts/bench-rebuild 2>&1 | grep -E "rebuild (cpu|gpu)|gpu/cpu"
done
