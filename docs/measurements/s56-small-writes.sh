#!/bin/bash
# Session 56: small writes under accel=gpu.  "This plugin": the tree's
# (6a1c49d + 4f339da: a parity update's encode reads the deltas alone,
# one submission when not gathered); "s55base" (4b77030,
# .device/exp/plugins/s55-base.so): each update an encode of the whole
# stripe with zeros for the unchanged data.  PART=rand (the run
# recorded, h200-small-writes-rand-s56.log): 10+4 on direct loop
# members, random requests of BSS [4K 16K] for 5 s a run, against
# OTHERS [s55base]; the parts and their knobs are s54-small-writes.sh's.
PLUGINS="s55base=.device/exp/plugins/s55-base.so ${PLUGINS:-}" \
  OTHERS=${OTHERS:-s55base} exec "$(dirname "$0")/s54-small-writes.sh"
