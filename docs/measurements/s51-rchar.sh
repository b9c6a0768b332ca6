#!/bin/bash
# rchar/wchar of the server during degraded reads, cpu vs gpu; perf callers on cpu side
cd "$(dirname "$0")/../.."
source .device/unpack.sh >/dev/null
P=$PWD/.device/exp/perfw
for a in cpu gpu cpu gpu; do
  ( for i in $(seq 300); do
      pid=$(for p in $(pgrep nbdkit); do c=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null); [[ $c == *accel=$a* && $c != *create=true* ]] && echo $p; done | head -1)
      [ -n "$pid" ] && break; sleep 0.1
    done
    sleep 2; a0=$(grep -E 'rchar|wchar|syscr|syscw' /proc/$pid/io | awk '{print $2}' | tr '\n' ' ')
    sleep 4; a1=$(grep -E 'rchar|wchar|syscr|syscw' /proc/$pid/io | awk '{print $2}' | tr '\n' ' ')
    echo "$a $a0 $a1" | awk '{ printf "%s: rchar %.2f GB, wchar %.2f GB, rchar/wchar %.3f, preads %d, writes %d, bytes a pread %.0f\n", $1, ($6-$2)/1e9, ($7-$3)/1e9, ($6-$2)/($7-$3), $8-$4, $9-$5, ($6-$2)/($8-$4) }' ) &
  K=8 M=8 LOST=8 VARIANTS="accel=$a" CONNS=16 SECS=8 SIZE=4G scripts/bench-steady-reads 2>&1 | grep -E "CPU-s/GB"
  wait
done
out=/tmp/prof-cpu.data
( for i in $(seq 300); do pid=$(for p in $(pgrep nbdkit); do c=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null); [[ $c == *accel=cpu* && $c != *create=true* ]] && echo $p; done | head -1); [ -n "$pid" ] && break; sleep 0.1; done; sleep 2; echo $pid > $out.pid; $P record -q -a -F 999 -g -o $out -- sleep 4 ) &
K=8 M=8 LOST=8 VARIANTS="accel=cpu" CONNS=16 SECS=10 SIZE=4G scripts/bench-steady-reads 2>&1 | grep -E "CPU-s/GB"
wait
pid=$(cat $out.pid)
$P report -i $out --pid "$pid" --no-children -g none --sort sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -12
for s in shmem_file_read_iter _copy_to_iter copy_page_to_iter; do
echo "--- callers of $s (cpu)"
$P report -i $out --pid "$pid" --no-children -S $s -g caller,0.5,callee --stdio 2>/dev/null | grep -v "^$" | grep -v "^#" | head -30
done
