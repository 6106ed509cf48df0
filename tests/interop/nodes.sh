# Sourced by run.sh and jvm_go.sh: the shared node pool and its cleanup. The caller
# sets NAME (its log prefix), HERE, BIN, KIND (redlockd or redis) and WORK, and
# declares PIDS=() and PORTS=() first.
#
#   start_nodes N [FLAG...]
#                   N nodes on free ports (redlockd: --max-ttl 30s --restart-delay 0
#                   --clock manual --enable-debug-command, each with its own --dir, then
#                   FLAGs; redis-server: no persistence, FLAGs not allowed); adds their
#                   ports to PORTS and sets NODES ("host:port,...") to these N nodes
#   cleanup         the EXIT trap: stops every process started, and the cases' own
#                   nodes listed in $WORK/extra-pids; keeps $WORK when the run failed

stop_pid() { # pid: TERM, bounded wait, then KILL
  local pid="$1" i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  echo "$NAME: pid $pid ignored SIGTERM for 5 s; sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$? pid port
  set +e
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  # Nodes started (and killed) by the cases themselves: normally stopped by their
  # fixtures; this catches a runner killed by its timeout. Only processes still
  # running our binary.
  if [[ -f "$WORK/extra-pids" ]]; then
    while read -r pid; do
      [[ -n "$pid" ]] || continue
      if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$BIN"; then
        stop_pid "$pid"
      fi
    done <"$WORK/extra-pids"
  fi
  for port in "${PORTS[@]}"; do
    python3 "$HERE/tools.py" wait-closed "127.0.0.1:$port" 5 || true
  done
  if [[ $rc -ne 0 && -d "$WORK" ]]; then
    echo "$NAME: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit $rc
}

start_nodes() { # count [redlockd flag ...]
  local count="$1" port new
  shift
  [[ "$KIND" == redlockd || $# -eq 0 ]] || { echo "$NAME: start_nodes: flags are redlockd's" >&2; exit 1; }
  read -r -a new <<<"$(python3 "$HERE/tools.py" free-ports "$count")"
  PORTS+=("${new[@]}")
  NODES=""
  for port in "${new[@]}"; do
    if [[ "$KIND" == redlockd ]]; then
      NO_COLOR=1 "$BIN" --bind 127.0.0.1 --port "$port" --max-ttl 30s --restart-delay 0 \
        --clock manual --enable-debug-command --lock-introspection yes --dir "$WORK/node-$port" "$@" \
        >"$WORK/node-$port.log" 2>&1 </dev/null &
    else
      "$BIN" --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize no \
        >"$WORK/node-$port.log" 2>&1 </dev/null &
    fi
    PIDS+=("$!")
    NODES="${NODES:+$NODES,}127.0.0.1:$port"
  done
  for port in "${new[@]}"; do
    if ! python3 "$HERE/tools.py" wait-ping "127.0.0.1:$port" 20; then
      echo "--- node-$port.log ---" >&2
      tail -n 30 "$WORK/node-$port.log" >&2 || true
      printf '%s: node on port %s did not answer PING\n' "$NAME" "$port" >&2
      exit 1
    fi
  done
}
