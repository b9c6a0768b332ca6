#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Remote members over TLS (nbds+unix:// URIs with a pre-shared key):
# three stock nbdkit file servers that require TLS hold a 2+1 array;
# it is created, written (nbdcopy), read back and its parity checked
# offline on the servers' files; started again, degraded with one server
# down, it reads the same.  A member URI with the wrong key, or without
# TLS to a server that requires it, is left out with the reason logged,
# like a host that is down, and the array reads the same.

source "$(dirname "$0")/functions.sh"
requires_plugin
requires_check
requires_cmd nbdcopy nbdinfo cmp
if ! run_nbdkit "$PLUGIN" --dump-plugin | grep -qx 'gpuraid_nbd_members=yes'; then
  echo "$0: SKIP: plugin built without libnbd (gpuraid_nbd_members=no)"
  exit 77
fi
nbdkit --dump-config | grep -qx 'tls=yes' ||
  { echo "$0: SKIP: nbdkit built without TLS"; exit 77; }

k=2 m=1 chunk=65536 n=3
psk=$tmpdir/keys.psk bad=$tmpdir/bad.psk
echo "alice:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$psk"
echo "alice:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$bad"
chmod 600 "$psk" "$bad"
make_members $n 8M host

kill_server ()
{
  [ -f "$tmpdir/h$1.pid" ] && kill "$(cat "$tmpdir/h$1.pid")" 2>/dev/null
  return 0
}
serve ()
{
  rm -f "$tmpdir/h$1.sock"
  nbdkit -P "$tmpdir/h$1.pid" -U "$tmpdir/h$1.sock" --tls=require \
    --tls-psk="$psk" file "${members[$1]}" || fail "nbdkit --tls=require for member $1"
  cleanup_fn kill_server $1
}
# member_uri I [KEYFILE]: member I's URI with TLS (and that key).
member_uri ()
{
  echo "nbds+unix://alice@/?socket=$tmpdir/h$1.sock&tls-psk-file=${2:-$psk}"
}
for (( i = 0; i < n; i++ )); do serve $i; done
args=()
for (( i = 0; i < n; i++ )); do args+=("member=$(member_uri $i)"); done

start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m chunk=$chunk create=true ||
  fail "create over TLS"
size=$(nbdinfo --size "$uri")
head -c "$size" /dev/urandom >"$tmpdir/ref"
nbdcopy "$tmpdir/ref" "$uri" || fail "nbdcopy to the array"
nbdcopy "$uri" "$tmpdir/back" || fail "nbdcopy from the array"
cmp "$tmpdir/ref" "$tmpdir/back" || fail "read back differs"
echo "written and read back over TLS: $size bytes"
stop_nbdkit "$pid"
check_parity $k $m $chunk rs "${members[@]}"

# Again with server 1 down: degraded, the same bytes.
kill_server 1
sleep 0.5
start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "${args[@]}" m=$m ||
  fail "degraded start over TLS"
rm -f "$tmpdir/back"
nbdcopy "$uri" "$tmpdir/back" || fail "nbdcopy degraded"
cmp "$tmpdir/ref" "$tmpdir/back" || fail "degraded read back differs"
echo "degraded (server 1 down) reads the same"
stop_nbdkit "$pid"
serve 1

# The wrong key, or no TLS where the server requires it: that member
# cannot be opened (the log says why) and is left out, like a host that
# is down; the array starts degraded and reads the same.
for what in "the wrong key" "no TLS"; do
  if [ "$what" = "no TLS" ]; then
    bad0="nbd+unix:///?socket=$tmpdir/h0.sock" reason="requires TLS"
  else
    bad0=$(member_uri 0 "$bad") reason="TLS|tls|handshake"
  fi
  before=$(wc -l <"$nbdkit_log")
  start_nbdkit -P "$pid" -U "$sock" "$PLUGIN" "member=$bad0" "${args[@]:1}" m=$m ||
    fail "start with $what for member 0"
  # The line names the member and ends with libnbd's reason.
  tail -n +$(( before + 1 )) "$nbdkit_log" |
    grep -E "member 0 is missing.*cannot be opened: .*($reason)" >&2 ||
    fail "$what: no line saying why member 0 was left out ($reason)"
  rm -f "$tmpdir/back"
  nbdcopy "$uri" "$tmpdir/back" || fail "nbdcopy with $what for member 0"
  cmp "$tmpdir/ref" "$tmpdir/back" || fail "read back with $what for member 0 differs"
  echo "member 0 with $what: left out, the array reads the same"
  stop_nbdkit "$pid"
done
echo "$0: PASS"
