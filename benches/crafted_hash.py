#!/usr/bin/env python3
"""Crafted string-hash inputs against one server: `benches/crafted_hash.py PORT N`.
EVAL "return #ARGV" 0 with N crafted 64-byte arguments that collide under stock Lua
5.1's sampled hash, then a script building 600k strings in a loop. Run it against
redlockd and redis-server in turn and compare."""
import socket, sys, time
port = int(sys.argv[1]); n = int(sys.argv[2])
args = []
for i in range(n):
    b = bytearray(b"a" * 64)
    # positions hashed: l1 = 64, 61, ..., 1 -> str[l1-1] = 63, 60, ..., 0; vary 1,2,4,5,...
    x = i
    for pos in [p for p in range(64) if p % 3 != 0][:20]:
        b[pos] = 97 + (x % 26); x //= 26
    args.append(bytes(b))
cmd = [b"EVAL", b"return #ARGV", b"0"] + args
out = [b"*%d\r\n" % len(cmd)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in cmd]
payload = b"".join(out)
s = socket.create_connection(("127.0.0.1", port))
t = time.time()
s.sendall(payload)
r = s.recv(100)
print(port, "crafted EVAL", n, "args:", r.strip(), "%.3f s" % (time.time() - t))
# 600k strings built in a loop
body = b"local t = {} for i = 1, 600000 do t[i] = string.rep('x', 40) .. i end return #t"
s.sendall(b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(body), body))
t = time.time()
r = s.recv(100)
print(port, "600k strings:", r.strip(), "%.3f s" % (time.time() - t))
