#!/usr/bin/env python3
"""The protected resource of the harness: a tiny key-value store over TCP that fences
with tokens. Per key it keeps the highest token seen (on a read or a write) and the
highest written: a read with a token below the highest seen is refused; a write is
accepted only with a token above the highest written and not below the highest seen.
Reads and writes carrying "-" (no token) are always served.

Fencing the read matters for read-modify-write: if only writes were checked, a later
holder that read the same state could overwrite an earlier holder's write with a
higher token, and the earlier addition would be lost.

Protocol, one line each way:
    GET key token|-             -> VAL <value> (value "[]" when unset) | STALE <highest>
    PUT key token|- hid value   -> OK | STALE <highest>

Every PUT is logged, in the order it was applied, to the JSON-lines file given as
the second argument: {"seq", "t", "key", "hid", "token", "accepted", "value"}.

    storage.py HOST:PORT LOGFILE [--writes-only]

--writes-only checks tokens on writes alone (reads ignore theirs): the store that
loses read-modify-write updates, for showing that it does.
"""

import json
import signal
import socketserver
import sys
import threading
import time

lock = threading.Lock()
values = {}
last_seen = {}
last_written = {}
seq = [0]
log = None
WRITES_ONLY = "--writes-only" in sys.argv[3:]


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            parts = line.split(" ", 4)
            if parts[0] == "GET" and len(parts) == 3:
                key, tok = parts[1], None if parts[2] == "-" or WRITES_ONLY else int(parts[2])
                with lock:
                    seen = last_seen.get(key)
                    if tok is not None and seen is not None and tok < seen:
                        reply = f"STALE {seen}"
                    else:
                        if tok is not None:
                            last_seen[key] = tok if seen is None else max(seen, tok)
                        reply = "VAL " + values.get(key, "[]")
            elif parts[0] == "PUT" and len(parts) == 5:
                key, token, hid, value = parts[1], parts[2], parts[3], parts[4]
                tok = None if token == "-" else int(token)
                with lock:
                    written, seen = last_written.get(key), last_seen.get(key)
                    accepted = tok is None or (
                        (written is None or tok > written) and (seen is None or tok >= seen))
                    if accepted:
                        values[key] = value
                        if tok is not None:
                            last_written[key] = tok
                            last_seen[key] = tok if seen is None else max(seen, tok)
                    seq[0] += 1
                    log.write(json.dumps({
                        "seq": seq[0], "t": time.monotonic_ns(), "key": key, "hid": hid,
                        "token": tok, "accepted": accepted, "value": value,
                    }) + "\n")
                    log.flush()
                    highest = max(x for x in (written, seen, -1) if x is not None)
                reply = "OK" if accepted else f"STALE {highest}"
            else:
                reply = "ERR bad request"
            try:
                self.wfile.write((reply + "\n").encode())
                self.wfile.flush()
            except OSError:
                return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global log
    host, port = sys.argv[1].rsplit(":", 1)
    log = open(sys.argv[2], "w", encoding="utf-8")
    srv = Server((host, int(port)), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    print(f"storage: listening on {host}:{port}", flush=True)
    srv.serve_forever(poll_interval=0.1)
    with lock:
        log.flush()


if __name__ == "__main__":
    main()
