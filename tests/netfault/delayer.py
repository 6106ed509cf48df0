#!/usr/bin/env python3
"""Packet delay without tc netem: packets sent to an NFQUEUE (an iptables rule of the
harness) are held here and given back to the kernel after a delay.

Speaks nfnetlink_queue over a raw netlink socket (standard library only), in the
network namespace it is started in. Usage:

    delayer.py QUEUE_NUM DELAY_MS [JITTER_MS] [SEED]

Runs until SIGTERM; then it accepts every packet still held (a heal lets the
in-flight packets arrive late, as a real network would) and exits.
"""

import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NF_ACCEPT = 1


def attr(kind, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def message(kind, queue, attrs, flags=NLM_F_REQUEST, seq=0):
    # nfgenmsg: family AF_UNSPEC, version 0, res_id = queue number (big-endian)
    body = struct.pack("=BB", 0, 0) + struct.pack(">H", queue) + b"".join(attrs)
    mtype = (NFNL_SUBSYS_QUEUE << 8) | kind
    return struct.pack("=IHHII", 16 + len(body), mtype, flags, seq, 0) + body


def parse_attrs(buf):
    out = {}
    i = 0
    while i + 4 <= len(buf):
        n, kind = struct.unpack_from("=HH", buf, i)
        if n < 4:
            break
        out[kind & 0x3FFF] = buf[i + 4 : i + n]
        i += (n + 3) & ~3
    return out


def check_ack(sock):
    data = sock.recv(65536)
    n, mtype = struct.unpack_from("=IH", data, 0)
    if mtype == NLMSG_ERROR:
        (err,) = struct.unpack_from("=i", data, 16)
        if err != 0:
            raise OSError(-err, "nfqueue config: " + os.strerror(-err))


def main():
    queue = int(sys.argv[1])
    delay = int(sys.argv[2]) / 1000.0
    jitter = int(sys.argv[3]) / 1000.0 if len(sys.argv) > 3 else 0.0
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((0, 0))
    cmd = struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, 0)
    sock.send(message(NFQNL_MSG_CONFIG, queue, [attr(NFQA_CFG_CMD, cmd)], NLM_F_REQUEST | NLM_F_ACK, 1))
    check_ack(sock)
    params = struct.pack(">IB", 0, NFQNL_COPY_META)
    sock.send(message(NFQNL_MSG_CONFIG, queue, [attr(NFQA_CFG_PARAMS, params)], NLM_F_REQUEST | NLM_F_ACK, 2))
    check_ack(sock)
    sock.send(message(NFQNL_MSG_CONFIG, queue, [attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", 65536))], NLM_F_REQUEST | NLM_F_ACK, 3))
    check_ack(sock)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    held = []  # heap of (release time, order, packet id)
    order = 0
    last_release = 0.0
    print(f"delayer: queue {queue}, delay {delay * 1000:.0f} ms", flush=True)

    def verdict(pid):
        hdr = struct.pack(">II", NF_ACCEPT, pid)
        sock.send(message(NFQNL_MSG_VERDICT, queue, [attr(NFQA_VERDICT_HDR, hdr)]))

    while True:
        now = time.monotonic()
        if stopping:
            for _, _, pid in sorted(held):
                verdict(pid)
            return
        while held and held[0][0] <= now:
            verdict(heapq.heappop(held)[2])
        timeout = max(0.0, held[0][0] - now) if held else 0.2
        try:
            ready, _, _ = select.select([sock], [], [], min(timeout, 0.2))
        except InterruptedError:
            continue
        if not ready:
            continue
        try:
            data = sock.recv(1 << 20)
        except InterruptedError:
            continue
        i = 0
        while i + 16 <= len(data):
            n, mtype = struct.unpack_from("=IH", data, i)
            if n < 16:
                break
            if mtype == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                attrs = parse_attrs(data[i + 20 : i + n])
                hdr = attrs.get(NFQA_PACKET_HDR)
                if hdr:
                    (pid,) = struct.unpack_from(">I", hdr, 0)
                    # In order: a later packet never overtakes an earlier one (TCP
                    # would cope, but a FIFO link is what the fault models).
                    due = max(time.monotonic() + delay + rng.uniform(0, jitter), last_release)
                    last_release = due
                    order += 1
                    heapq.heappush(held, (due, order, pid))
            i += (n + 3) & ~3


if __name__ == "__main__":
    main()
