#!/bin/bash
# Session 63: issue 24's rows again with the engine set up before serving
# (the fresh server's first run no longer slow), medians of 3: writes of
# 10+4 at 8 and 16 connections, then 8+8 and 16+16 written and read with
# 8 members lost; accel=cpu, gpu and auto; ROUNDS rounds.
env -u LOST SERVERS="10:4:cpu 10:4:gpu 10:4:auto" CONNS="8 16" SEQ=4G \
  REPEAT=3 STATS=1 ROUNDS=${ROUNDS:-1} scripts/bench-connections 2>&1 |
  grep -E "^row|x the |write at|^[0-9]+\+[0-9]+ accel|auto /"
env SERVERS="8:8:cpu 8:8:gpu 8:8:auto 16:16:cpu 16:16:gpu 16:16:auto" \
  CONNS="8 16" SEQ=4G REPEAT=3 LOST=8 STATS=1 ROUNDS=${ROUNDS:-1} \
  scripts/bench-connections 2>&1 |
  grep -E "^row|x the |write at|lost: read at|^[0-9]+\+[0-9]+ accel|auto /"
