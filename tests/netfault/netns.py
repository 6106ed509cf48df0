"""Hosts as Linux network namespaces on one bridge, and the faults a network can have.

Every name this makes starts with PREFIX plus the creating process's pid and a random
tag (`nfh<pid>x<tag>-<host>`), so two runs never collide and a crashed run's leftovers
are recognisable: `remove_leftovers` deletes namespaces of runs whose process is gone.
The bridge and the host ends of the links live in a namespace of their own (`-sw`), so
nothing is made in the caller's namespace and deleting the namespaces removes
every link.
"""

import ctypes
import os
import random
import socket
import subprocess
import time

PREFIX = "nfh"
SUBNET = "10.77.0"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def run(argv, check=True, timeout=20, input_text=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def can_make_namespaces():
    """None when namespaces, veth links and iptables work here; else why not."""
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_SYS_ADMIN)"
    for tool in ("ip", "iptables", "iptables-restore"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
            return f"{tool} not found (apt-get install iproute2 iptables)"
    probe = f"{PREFIX}{os.getpid()}xprobe"
    r = run(["ip", "netns", "add", probe], check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    try:
        r = run(["ip", "-n", probe, "link", "add", "name", "nfa", "type", "veth", "peer", "name", "nfb"], check=False)
        if r.returncode != 0:
            return f"cannot make a veth link: {r.stderr.strip()}"
        r = run(["ip", "netns", "exec", probe, "iptables", "-S"], check=False)
        if r.returncode != 0:
            return f"iptables does not work in a namespace: {r.stderr.strip()}"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_leftovers(log):
    """Deletes namespaces (and kills what runs in them) left by runs that are gone."""
    r = run(["ip", "netns", "list"], check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        tag = name[len(PREFIX):].split("x", 1)[0]
        if tag.isdigit() and _pid_alive(int(tag)) and int(tag) != os.getpid():
            continue  # another live run's
        kill_namespace_processes(name)
        run(["ip", "netns", "del", name], check=False)
        log(f"removed leftover namespace {name}")


def kill_namespace_processes(ns):
    r = run(["ip", "netns", "pids", ns], check=False)
    for p in r.stdout.split():
        try:
            os.kill(int(p), 9)
        except (ProcessLookupError, ValueError):
            pass


class Net:
    """A switch namespace with a bridge and one namespace per host, each with one veth
    link (eth0) to the bridge and an address in SUBNET."""

    def __init__(self, hosts, log):
        self.run_tag = f"{PREFIX}{os.getpid()}x{random.SystemRandom().randrange(16**6):06x}"
        self.hosts = dict(hosts)  # name -> last octet
        self.log = log
        self.made = []
        self.sw = self.ns("sw")

    def ns(self, host):
        return f"{self.run_tag}-{host}"

    def ip(self, host):
        return f"{SUBNET}.{self.hosts[host]}"

    def up(self):
        run(["ip", "netns", "add", self.sw])
        self.made.append(self.sw)
        run(["ip", "-n", self.sw, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.sw, "link", "set", "br0", "up"])
        for host in self.hosts:
            ns = self.ns(host)
            run(["ip", "netns", "add", ns])
            self.made.append(ns)
            port = f"p-{host}"
            run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", self.sw])
            run(["ip", "-n", self.sw, "link", "set", port, "master", "br0"])
            run(["ip", "-n", self.sw, "link", "set", port, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        self.log(f"network up: {len(self.hosts)} hosts on a bridge, namespaces {self.run_tag}-*")

    def down(self):
        for ns in reversed(self.made):
            kill_namespace_processes(ns)
        for ns in reversed(self.made):
            run(["ip", "netns", "del", ns], check=False)
        left = [l for l in run(["ip", "netns", "list"], check=False).stdout.split() if l.startswith(self.run_tag)]
        self.made = []
        return left

    def exec_argv(self, host, argv):
        return ["ip", "netns", "exec", self.ns(host)] + list(argv)

    def set_rules(self, rules):
        """Replaces the iptables filter and mangle tables of each host in `rules`
        (host -> (filter lines, mangle lines), iptables-restore lines without the table
        headers): one atomic step per host, the hosts in parallel, and only those whose
        rules changed since the last call."""
        self.rules_now = getattr(self, "rules_now", {})
        procs = []
        for host, (filter_rules, mangle_rules) in rules.items():
            text = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
            text += "".join(r + "\n" for r in filter_rules) + "COMMIT\n"
            text += "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n"
            text += ":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
            text += "".join(r + "\n" for r in mangle_rules) + "COMMIT\n"
            if self.rules_now.get(host) == text:
                continue
            p = subprocess.Popen(self.exec_argv(host, ["iptables-restore"]), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append((host, text, p))
        errors = []
        for host, text, p in procs:
            _, err = p.communicate(text, timeout=30)
            if p.returncode != 0:
                self.rules_now.pop(host, None)
                errors.append(f"{host}: iptables-restore exit {p.returncode}: {err.strip()}")
            else:
                self.rules_now[host] = text
        if errors:
            raise RuntimeError("; ".join(errors))

    def connect(self, host, addr, timeout):
        """A TCP connection made inside `host`'s namespace (the socket keeps that
        namespace after this thread switches back)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.ns(host)}", os.O_RDONLY)
        try:
            if _libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                s = socket.socket()
            finally:
                if _libc.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back")
        finally:
            os.close(own)
            os.close(target)
        s.settimeout(timeout)
        try:
            s.connect(addr)
        except OSError:
            s.close()
            raise
        return s


def resp_call(sock, *args):
    """One RESP2 command; returns str / int / None / list, or raises on an error reply."""
    out = f"*{len(args)}\r\n"
    for a in args:
        b = str(a)
        out += f"${len(b.encode())}\r\n{b}\r\n"
    sock.sendall(out.encode())
    f = sock.makefile("rb")
    try:
        return _resp_read(f)
    finally:
        f.close()


def _resp_read(f):
    line = f.readline()
    if not line:
        raise ConnectionError("closed")
    kind, rest = line[:1], line[1:-2].decode()
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2].decode()
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    raise RuntimeError(f"bad reply {line!r}")


def wait_until(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
