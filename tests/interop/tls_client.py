"""redis-py over rediss:// against TLS-only redlockd nodes with mutual TLS, and
pottery's Redlock over five of them. Run by tls.sh:

    python tls_client.py PKI_DIR PORT1 ... PORT5
"""
import sys

import redis
from pottery import Redlock


def client(pki, port, cert=True):
    extra = {}
    if cert:
        extra = {"ssl_certfile": f"{pki}/client.crt", "ssl_keyfile": f"{pki}/client.key"}
    return redis.Redis.from_url(
        f"rediss://localhost:{port}",
        ssl_ca_certs=f"{pki}/ca.crt",
        socket_timeout=5,
        socket_connect_timeout=5,
        **extra,
    )


def main(pki, ports):
    r = client(pki, ports[0])
    assert r.ping() is True
    assert r.set("py-key", "value", px=10_000) is True
    assert r.get("py-key") == b"value"
    assert r.delete("py-key") == 1
    info = r.info("server")
    assert info["tls_port"] == ports[0], info
    # A pipeline crosses TLS records in both directions.
    with r.pipeline(transaction=False) as p:
        for i in range(500):
            p.set(f"k{i}", "x" * 1000, px=10_000)
        assert all(p.execute())
    assert len(r.get("k499")) == 1000

    # Mutual TLS: no client certificate, no reply.
    try:
        client(pki, ports[0], cert=False).ping()
    except (redis.exceptions.ConnectionError, OSError):
        pass
    else:
        raise AssertionError("a client without a certificate was served")

    # pottery's Redlock over five rediss:// nodes.
    masters = [client(pki, p) for p in ports]
    lock = Redlock(key="py-tls-lock", masters=masters, auto_release_time=10)
    assert lock.acquire(blocking=False)
    other = Redlock(key="py-tls-lock", masters=[client(pki, p) for p in ports], auto_release_time=10)
    assert not other.acquire(blocking=False), "a second holder got the lock"
    lock.release()
    assert other.acquire(blocking=False)
    other.release()
    print("tls: redis-py rediss:// (PING, SET, GET, INFO, pipeline); refused without a "
          "client certificate; pottery Redlock over 5 rediss:// nodes")


if __name__ == "__main__":
    main(sys.argv[1], [int(p) for p in sys.argv[2:]])
