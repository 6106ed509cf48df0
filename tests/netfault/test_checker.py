#!/usr/bin/env python3
"""The checkers on hand-made histories (each must flag the violation it exists for and
pass the clean history next to it) and the storage's fencing rules, on 127.0.0.1.
python3 tests/netfault/test_checker.py"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

MS = 1_000_000


def hold(c, hid, start, end, token=None, valid_ms=1000):
    return [
        {"ev": "acquire", "ph": "invoke", "c": c, "hid": hid, "t": start - MS},
        {"ev": "acquire", "ph": "ok", "c": c, "hid": hid, "t": start, "token": token,
         "valid_ms": valid_ms, "dur_ms": 1.0, "bound_ms": 2150},
        {"ev": "release", "ph": "invoke", "c": c, "hid": hid, "t": end},
        {"ev": "release", "ph": "ok", "c": c, "hid": hid, "t": end + MS, "deleted": 5,
         "dur_ms": 1.0, "bound_ms": 50},
    ]


def write(c, hid, t, elem, ph="ok"):
    return {"ev": "write", "ph": ph, "c": c, "hid": hid, "t": t, "elem": elem}


def put(seq, key, hid, token, accepted, value):
    return {"seq": seq, "t": seq, "key": key, "hid": hid, "token": token,
            "accepted": accepted, "value": value}


class Mutex(unittest.TestCase):
    def test_sequential_holds_pass(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS) + hold(2, "2-1", 21 * MS, 30 * MS)
        self.assertEqual(checker.check_mutex(checker.holds(ev, 100 * MS)), [])

    def test_overlapping_holds_fail(self):
        ev = hold(1, "1-1", 10 * MS, 25 * MS) + hold(2, "2-1", 21 * MS, 30 * MS)
        v = checker.check_mutex(checker.holds(ev, 100 * MS))
        self.assertEqual(len(v), 1)
        self.assertIn("2-1", v[0]["desc"])
        self.assertEqual((v[0]["first"], v[0]["shown"], v[0]["overran"]), (10 * MS, 21 * MS, []))

    def test_an_overlap_after_the_validity_is_marked_overran(self):
        ev = hold(1, "1-1", 10 * MS, 25 * MS, valid_ms=5) + hold(2, "2-1", 21 * MS, 30 * MS)
        v = checker.check_mutex(checker.holds(ev, 100 * MS))
        self.assertEqual(v[0]["overran"], [15 * MS])

    def test_a_hold_never_released_lasts_to_the_end(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS)[:2] + hold(2, "2-1", 50 * MS, 60 * MS)
        self.assertEqual(len(checker.check_mutex(checker.holds(ev, 100 * MS))), 1)


class Set(unittest.TestCase):
    def test_all_acknowledged_present_pass(self):
        ev = [write(1, "1-1", 1, 7), write(2, "2-1", 2, 8), write(3, "3-1", 3, 9, ph="refused")]
        log = [put(1, "k", "1-1", None, True, "[7]"), put(2, "k", "2-1", None, True, "[7,8]")]
        v, n = checker.check_set(ev, log, "k", {})
        self.assertEqual((v, n), ([], 2))

    def test_lost_addition_fails(self):
        # both read [], both wrote: the second write lost the first's element
        ev = [write(1, "1-1", 1, 7), write(2, "2-1", 2, 8)]
        log = [put(1, "k", "1-1", None, True, "[7]"), put(2, "k", "2-1", None, True, "[8]")]
        hm = checker.holds(hold(1, "1-1", 0, 10) + hold(2, "2-1", 0, 10), 100)
        v, _ = checker.check_set(ev, log, "k", hm)
        self.assertEqual(len(v), 1)
        self.assertEqual(v[0]["overran"], [])
        self.assertIn("element 7", v[0]["desc"])
        self.assertIn("overwritten by hold 2-1", v[0]["desc"])


class Fenced(unittest.TestCase):
    def test_in_order_writes_pass(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS, 1) + hold(2, "2-1", 21 * MS, 30 * MS, 2)
        log = [put(1, "k", "1-1", 1, True, "a"), put(2, "k", "2-1", 2, True, "b")]
        self.assertEqual(checker.check_fenced(checker.holds(ev, 100 * MS), log, "k"), [])

    def test_refused_stale_write_passes(self):
        ev = hold(1, "1-1", 10 * MS, 40 * MS, 1) + hold(2, "2-1", 21 * MS, 30 * MS, 2)
        log = [put(1, "k", "2-1", 2, True, "b"), put(2, "k", "1-1", 1, False, "a")]
        self.assertEqual(checker.check_fenced(checker.holds(ev, 100 * MS), log, "k"), [])

    def test_accepted_stale_write_fails(self):
        ev = hold(1, "1-1", 10 * MS, 40 * MS) + hold(2, "2-1", 21 * MS, 30 * MS)
        log = [put(1, "k", "2-1", None, True, "b"), put(2, "k", "1-1", None, True, "a")]
        v = checker.check_fenced(checker.holds(ev, 100 * MS), log, "k")
        self.assertEqual(len(v), 1)
        self.assertIn("stale write of hold 1-1", v[0]["desc"])
        self.assertEqual(v[0]["overran"], [])

    def test_a_stale_write_past_the_validity_is_marked_overran(self):
        ev = hold(1, "1-1", 10 * MS, 40 * MS, valid_ms=5) + hold(2, "2-1", 21 * MS, 30 * MS)
        log = [put(1, "k", "2-1", None, True, "b"), dict(put(2, "k", "1-1", None, True, "a"), t=35 * MS)]
        v = checker.check_fenced(checker.holds(ev, 100 * MS), log, "k")
        self.assertEqual(v[0]["overran"], [15 * MS])

    def test_tokens_out_of_grant_order_fail(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS, 5) + hold(2, "2-1", 21 * MS, 30 * MS, 5)
        v = checker.check_fenced(checker.holds(ev, 100 * MS), [], "k")
        self.assertEqual(len(v), 1)
        self.assertIn("not above", v[0]["desc"])


class Bounds(unittest.TestCase):
    def test_within_bound_passes(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS)
        v, n, longest = checker.check_bounds(ev, [], 100)
        self.assertEqual((v, n), ([], 2))
        self.assertEqual(longest, {"acquire": (1.0, 2150), "release": (1.0, 50)})

    def test_late_release_fails_unless_paused(self):
        ev = hold(1, "1-1", 10 * MS, 20 * MS)
        ev[3] = dict(ev[3], dur_ms=5000.0, t=ev[2]["t"] + 5000 * MS)
        v, _, longest = checker.check_bounds(ev, [], 100)
        self.assertEqual(len(v), 1)
        self.assertEqual(longest["release"], (5000.0, 50))
        v, n, longest = checker.check_bounds(ev, [(ev[2]["t"] + MS, ev[2]["t"] + 4000 * MS)], 100)
        self.assertEqual((v, n), ([], 1))
        self.assertNotIn("release", longest)


class Storage(unittest.TestCase):
    args = []

    def setUp(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.dir = tempfile.TemporaryDirectory()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "storage.py"),
             f"127.0.0.1:{self.port}", os.path.join(self.dir.name, "log.jsonl")] + self.args,
            stdout=subprocess.PIPE)
        self.assertIn(b"listening", self.proc.stdout.readline())

    def tearDown(self):
        self.proc.terminate()
        self.proc.wait(5)
        self.proc.stdout.close()
        self.dir.cleanup()

    def call(self, line):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(line.encode() + b"\n")
            return s.makefile().readline().strip()

    def test_writes_need_a_token_above_the_last_written(self):
        self.assertEqual(self.call("PUT k 5 a-1 x"), "OK")
        self.assertEqual(self.call("PUT k 5 b-1 y"), "STALE 5")
        self.assertEqual(self.call("PUT k 4 c-1 z"), "STALE 5")
        self.assertEqual(self.call("PUT k 6 d-1 w"), "OK")
        self.assertEqual(self.call("GET k -"), "VAL w")

    def test_a_read_fences_older_holders(self):
        # B (token 8) reads, then A (token 7, an older holder) may neither read nor
        # write; B's own write with the token it read with is accepted.
        self.assertEqual(self.call("GET s 8"), "VAL []")
        self.assertEqual(self.call("GET s 7"), "STALE 8")
        self.assertEqual(self.call("PUT s 7 a-1 [1]"), "STALE 8")
        self.assertEqual(self.call("PUT s 8 b-1 [2]"), "OK")
        self.assertEqual(self.call("GET s -"), "VAL [2]")

    def test_without_tokens_everything_is_accepted(self):
        self.assertEqual(self.call("PUT k - a-1 x"), "OK")
        self.assertEqual(self.call("PUT k - b-1 y"), "OK")


class StorageWritesOnly(Storage):
    args = ["--writes-only"]

    def test_a_read_fences_older_holders(self):
        # the store that loses read-modify-write updates: the older holder's read
        # is served, only its write is refused
        self.assertEqual(self.call("GET s 8"), "VAL []")
        self.assertEqual(self.call("GET s 7"), "VAL []")
        self.assertEqual(self.call("PUT s 7 a-1 [1]"), "OK")
        self.assertEqual(self.call("PUT s 8 b-1 [2]"), "OK")
        self.assertEqual(self.call("GET s -"), "VAL [2]")


if __name__ == "__main__":
    unittest.main()
