#!/usr/bin/env bash
# The network-fault harness, bounded (CI) or as a soak (docs/netfault.md).
#
#   tests/netfault/run.sh target/release/redlockd target/release/examples/netfault_client [netfault.py flags]
#
# Installs what it needs from apt when missing (iptables, libfaketime), then runs
# netfault.py under a hard time limit: 420 s for the bounded run (two Redlock runs and
# the cluster run), the soak's minutes x 3 + 5 min with --soak. Exit: netfault.py's (0 ok or skipped with
# "skipped: why", 1 a violation or a harness failure); 124 when the limit was hit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 2 ]]; then
  echo "usage: $0 REDLOCKD NETFAULT_CLIENT [--seed N] [--soak MINUTES] [--out DIR]" >&2
  exit 64
fi
redlockd="$1" client="$2"
shift 2

if [[ "$(id -u)" -ne 0 ]]; then
  echo "netfault: skipped: not root (network namespaces, veth links and iptables need root)"
  exit 0
fi

missing=()
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || missing+=(libfaketime)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "netfault: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null \
    || { timeout 600 apt-get update -q </dev/null \
         && timeout 600 apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; } \
    || { echo "netfault: apt-get install ${missing[*]} failed" >&2; exit 1; }
fi

limit=420
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ "${args[$i]}" == "--soak" ]]; then
    limit=$(python3 -c "print(int(float('${args[$((i + 1))]}') * 180 + 300))")
  fi
done

# SIGTERM at the limit: netfault.py cleans up (processes, namespaces) and fails.
exec timeout --kill-after=30 "$limit" python3 "$here/netfault.py" \
  --redlockd "$redlockd" --client "$client" "$@"
