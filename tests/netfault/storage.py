#!/usr/bin/env python3
"""The protected resource of the harness: a tiny key-value store over TCP that, for a
write carrying a fencing token, accepts it only when the token is above the last one
it accepted for that key (writes carrying "-", no token, are always accepted).

Protocol, one line each way:
    GET key                     -> VAL <value>        (value "[]" when unset)
    PUT key token|- hid value   -> OK | STALE <last token>

Every PUT is logged, in the order it was applied, to the JSON-lines file given as
the second argument: {"seq", "t", "key", "hid", "token", "accepted", "value"}.

    storage.py HOST:PORT LOGFILE
"""

import json
import signal
import socketserver
import sys
import threading
import time

lock = threading.Lock()
values = {}
last_token = {}
seq = [0]
log = None


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            parts = line.split(" ", 4)
            if parts[0] == "GET" and len(parts) == 2:
                with lock:
                    reply = "VAL " + values.get(parts[1], "[]")
            elif parts[0] == "PUT" and len(parts) == 5:
                key, token, hid, value = parts[1], parts[2], parts[3], parts[4]
                tok = None if token == "-" else int(token)
                with lock:
                    last = last_token.get(key)
                    accepted = tok is None or last is None or tok > last
                    if accepted:
                        values[key] = value
                        if tok is not None:
                            last_token[key] = tok
                    seq[0] += 1
                    log.write(json.dumps({
                        "seq": seq[0], "t": time.time_ns(), "key": key, "hid": hid,
                        "token": tok, "accepted": accepted, "value": value,
                    }) + "\n")
                    log.flush()
                reply = "OK" if accepted else f"STALE {last}"
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
    log = open(sys.argv[2], "a", encoding="utf-8")
    srv = Server((host, int(port)), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    print(f"storage: listening on {host}:{port}", flush=True)
    srv.serve_forever(poll_interval=0.1)
    with lock:
        log.flush()


if __name__ == "__main__":
    main()
