#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The benchmarks' same-run ratios (scripts/bench-functions.sh,
# bench_ratios), from records made here: with one round, gpu / cpu of
# the MB/s and of both CPU-s/GB, and auto / the better side, as the
# figures' quotients; with several (bench-connections ROUNDS), each
# ratio the median of the rounds' own with their range, a round that
# lacks a side left out and said.  Needs nothing built.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-functions.sh
. "$top/scripts/bench-functions.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail () { echo "$0: FAIL: $*"; exit 1; }

# expect TITLE WANT: bench_ratios TITLE prints WANT (after its empty line)
expect () {
  local got
  got=$(bench_ratios "$1")
  [ "$got" = "$(printf '\n%s\n%s' "$1" "$2")" ] ||
    fail "$1: got:$got
wanted:
$2"
}

# One round, recorded as bench-connections does (bench_round left at 1).
bench_record 8+8/write/8conns cpu 1000 1.00 1.20
bench_record 8+8/write/8conns gpu 1250 0.80 1.08
bench_record 8+8/write/8conns auto 1200 0.85 1.10
bench_record 16+16/read,8lost/8conns cpu 2000 0.90 1.00
bench_record 16+16/read,8lost/8conns gpu 1800 0.81 0.95
bench_record 16+16/read,8lost/8conns auto 1900 0.90 1.00
bench_record 4+2/write/8conns cpu 900 1.00 1.00
expect "one round" \
"8+8/write/8conns: gpu / cpu 1.25 x the MB/s, 0.80 x the server CPU-s/GB, 0.90 x the machine CPU-s/GB; auto / gpu (the better) 0.96 x the MB/s
16+16/read,8lost/8conns: gpu / cpu 0.90 x the MB/s, 0.90 x the server CPU-s/GB, 0.95 x the machine CPU-s/GB; auto / cpu (the better) 0.95 x the MB/s"

# Three rounds: the median and range of each round's ratio; the better
# side changes between rounds; 16+16 has no gpu in round 2.
bench_round=2
bench_record 8+8/write/8conns cpu 1100 1.00 1.20
bench_record 8+8/write/8conns gpu 1000 0.90 1.20
bench_record 8+8/write/8conns auto 1078 0.95 1.20
bench_record 16+16/read,8lost/8conns cpu 2000 0.90 1.00
bench_round=3
bench_record 8+8/write/8conns cpu 1000 1.00 1.00
bench_record 8+8/write/8conns gpu 1300 0.70 0.90
bench_record 8+8/write/8conns auto 1300 0.70 0.90
bench_record 16+16/read,8lost/8conns cpu 1000 1.00 1.00
bench_record 16+16/read,8lost/8conns gpu 1200 0.70 0.80
expect "three rounds" \
"8+8/write/8conns: gpu / cpu 1.25 (0.91-1.30) x the MB/s, 0.80 (0.70-0.90) x the server CPU-s/GB, 0.90 (0.90-1.00) x the machine CPU-s/GB; auto / the better of each round 0.98 (0.96-1.00) x the MB/s  [3 rounds]
16+16/read,8lost/8conns: gpu / cpu 1.05 (0.90-1.20) x the MB/s, 0.80 (0.70-0.90) x the server CPU-s/GB, 0.88 (0.80-0.95) x the machine CPU-s/GB; auto / cpu (the better) 0.95 x the MB/s  [2 of 3 rounds]"

# Nothing with both sides: nothing printed, not even the title.
rm -f "$tmp/records"
bench_round=1
bench_record 4+2/write/8conns cpu 900 1.00 1.00
[ -z "$(bench_ratios "none")" ] || fail "a title without ratios"
echo "$0: PASS"
