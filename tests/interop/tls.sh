#!/usr/bin/env bash
# TLS against five redlockd nodes that serve TLS only (--port 0) and require client
# certificates (tls-auth-clients yes): redis-cli --tls, redis-py rediss:// (and pottery's
# Redlock over it), and `redlockd lock` with rediss:// nodes. Node 1 is configured by a
# config file, the others by REDLOCKD_* environment variables.
#
#   tests/interop/tls.sh path-to-redlockd
#
# Needs the openssl CLI (certificates are made here, gen-certs.sh), redis-cli, python3.
# Every process started here is stopped on exit; non-zero exit on any failure.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${1:?usage: tls.sh path-to-redlockd}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
die() { printf 'tls: %s\n' "$*" >&2; exit 1; }
command -v openssl >/dev/null || die "the openssl CLI is required (Debian: openssl)"
command -v redis-cli >/dev/null || die "redis-cli is required"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/redlockd-tls.XXXXXX")"
PIDS=()
cleanup() {
  local rc=$? pid
  set +e
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  if [[ $rc -ne 0 ]]; then
    for log in "$WORK"/*.log; do
      [[ -s "$log" ]] || continue
      echo "--- $(basename "$log") (last 20 lines) ---" >&2
      tail -n 20 "$log" >&2
    done
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT

"$HERE/gen-certs.sh" "$WORK/pki"
CA="$WORK/pki/ca.crt"
CLI_TLS=(--tls --cacert "$CA" --cert "$WORK/pki/client.crt" --key "$WORK/pki/client.key")

read -r -a PORTS <<<"$(python3 "$HERE/tools.py" free-ports 5)"
cat >"$WORK/node1.conf" <<CONF
# node 1 of 5: TLS only, mutual TLS
port 0
tls-port ${PORTS[0]}
tls-cert-file "$WORK/pki/server.crt"
tls-key-file "$WORK/pki/server.key"
tls-ca-cert-file "$WORK/pki/ca.crt"
tls-auth-clients yes
restart-delay 0
dir "$WORK/node-1"
loglevel notice
CONF
NO_COLOR=1 "$BIN" "$WORK/node1.conf" >"$WORK/node-1.log" 2>&1 </dev/null &
PIDS+=("$!")
for i in 1 2 3 4; do
  NO_COLOR=1 REDLOCKD_PORT=0 REDLOCKD_TLS_PORT="${PORTS[$i]}" \
    REDLOCKD_TLS_CERT_FILE="$WORK/pki/server.crt" REDLOCKD_TLS_KEY_FILE="$WORK/pki/server.key" \
    REDLOCKD_TLS_CA_CERT_FILE="$CA" REDLOCKD_RESTART_DELAY=0 REDLOCKD_DIR="$WORK/node-$((i + 1))" \
    "$BIN" >"$WORK/node-$((i + 1)).log" 2>&1 </dev/null &
  PIDS+=("$!")
done
NODES=""
for port in "${PORTS[@]}"; do
  up=""
  for _ in $(seq 1 100); do
    if [[ "$(timeout 5 redis-cli -h localhost -p "$port" "${CLI_TLS[@]}" PING 2>/dev/null)" == PONG ]]; then
      up=1; break
    fi
    sleep 0.05
  done
  [[ -n "$up" ]] || die "node on TLS port $port did not answer PING"
  NODES="${NODES:+$NODES,}rediss://localhost:$port"
done
echo "tls: 5 TLS-only nodes up: $NODES"

# --- redis-cli --tls ---------------------------------------------------------------
P="${PORTS[0]}"
[[ "$(redis-cli -h localhost -p "$P" "${CLI_TLS[@]}" SET greeting hello PX 10000)" == OK ]] || die "redis-cli --tls SET"
[[ "$(redis-cli -h localhost -p "$P" "${CLI_TLS[@]}" GET greeting)" == hello ]] || die "redis-cli --tls GET"
INFO="$(redis-cli -h localhost -p "$P" "${CLI_TLS[@]}" INFO server | tr -d '\r')"
grep -qx "tls_port:$P" <<<"$INFO" || die "INFO lacks tls_port:$P"
grep -qx "tcp_port:$P" <<<"$INFO" || die "INFO lacks tcp_port:$P (TLS-only node)"
# Mutual TLS: no client certificate, no reply.
if out="$(timeout 5 redis-cli -h localhost -p "$P" --tls --cacert "$CA" PING 2>&1)" && [[ "$out" == *PONG* ]]; then
  die "a client without a certificate got PONG"
fi
grep -q "Error accepting a client connection" "$WORK/node-1.log" || die "the refused handshake was not logged"
# Plain text on a TLS-only node: the plain port is off, the TLS port does not speak RESP.
if [[ "$(timeout 5 redis-cli -h localhost -p "$P" PING 2>/dev/null)" == PONG ]]; then
  die "plain PING answered on the TLS port"
fi
echo "tls: redis-cli --tls: PING, SET, GET, INFO tls_port; refused without a client certificate"

# --- redis-py rediss:// ------------------------------------------------------------
VENV="$HERE/.venv"
if ! "$VENV/bin/python" -c 'import redis, pottery' 2>/dev/null; then
  python3 -m venv "$VENV"
  timeout 600 "$VENV/bin/pip" install --disable-pip-version-check --no-input -q \
    -r "$HERE/requirements.txt" || die "pip install failed"
  sha256sum "$HERE/requirements.txt" | cut -d' ' -f1 >"$VENV/.requirements.sha256"
fi
timeout -k 5 120 "$VENV/bin/python" "$HERE/tls_client.py" "$WORK/pki" "${PORTS[@]}" \
  || die "redis-py over rediss:// failed"

# --- redlockd lock over rediss:// to 5 nodes ---------------------------------------
export REDLOCKD_NODES="$NODES" REDLOCKD_TLS_CA_CERT_FILE="$CA"
export REDLOCKD_TLS_CLIENT_CERT_FILE="$WORK/pki/client.crt" REDLOCKD_TLS_CLIENT_KEY_FILE="$WORK/pki/client.key"
out="$(timeout 30 "$BIN" lock --ttl 5s tls-job -- echo ran)" || die "redlockd lock over TLS exited $?"
[[ "$out" == ran ]] || die "redlockd lock over TLS printed '$out'"
# Held by one run: a second run is refused with 75 (held elsewhere).
timeout 30 "$BIN" lock --ttl 5s tls-job -- sleep 3 >"$WORK/holder.log" 2>&1 &
HOLDER=$!
PIDS+=("$HOLDER")
held=""
for _ in $(seq 1 100); do
  if [[ "$(redis-cli -h localhost -p "${PORTS[2]}" "${CLI_TLS[@]}" EXISTS tls-job)" == 1 ]]; then held=1; break; fi
  sleep 0.02
done
[[ -n "$held" ]] || die "the first redlockd lock never took the lock"
set +e
timeout 30 "$BIN" lock --ttl 5s tls-job -- echo second >"$WORK/second.log" 2>&1
rc=$?
set -e
[[ $rc -eq 75 ]] || die "a second redlockd lock while held exited $rc, not 75: $(cat "$WORK/second.log")"
wait "$HOLDER" || die "the holding redlockd lock exited $?"
[[ "$(redis-cli -h localhost -p "${PORTS[2]}" "${CLI_TLS[@]}" EXISTS tls-job)" == 0 ]] || die "the lock was not released"
# Without the client certificate every node refuses: 69 (too few nodes reachable).
set +e
env -u REDLOCKD_TLS_CLIENT_CERT_FILE -u REDLOCKD_TLS_CLIENT_KEY_FILE \
  timeout 30 "$BIN" lock --ttl 5s tls-job -- echo nope >"$WORK/nocert.log" 2>&1
rc=$?
set -e
[[ $rc -eq 69 ]] || die "redlockd lock without a client certificate exited $rc, not 69: $(cat "$WORK/nocert.log")"
echo "tls: redlockd lock over rediss:// to 5 nodes: ran, refused while held (75), refused without a client certificate (69)"
echo "tls: all TLS checks passed"
