"""Harnesses running at once do not share ports, keys, clocks or directories; a killed
test process leaves no redlockd behind; the plugin loads with autoload off."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import redis

import redlockd


def test_two_harnesses_at_once_do_not_collide(redlockd_factory):
    a = redlockd_factory(nodes=3)
    b = redlockd_factory(nodes=3)
    ports = {n.port for n in a.nodes} | {n.port for n in b.nodes}
    assert len(ports) == 6
    assert len({n.dir for n in a.nodes + b.nodes}) == 6
    ra, rb = redis.Redis.from_url(a.urls[0]), redis.Redis.from_url(b.urls[0])
    ra.set("k", "a", px=1_000)
    assert rb.get("k") is None
    rb.set("k", "b", px=1_000)
    a.advance(1_001)  # a's clock only
    assert ra.get("k") is None
    assert rb.get("k") == b"b"
    ra.close()
    rb.close()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie (Z) has exited; only its parent's wait is missing.
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.005)
    return False


def test_a_killed_test_process_leaves_no_redlockd_behind(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time, redlockd
        c = redlockd.Group(3)
        print(c.pid, *[n.dir for n in c.nodes], flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        harness_pid, dirs = int(line[0]), line[1:]
        assert not _gone(harness_pid)
        assert all(os.path.isdir(d) for d in dirs)
        child.send_signal(signal.SIGKILL)  # no finalizer, no atexit: only the pipe closes
        child.wait(timeout=10)
        assert wait_gone(harness_pid), f"redlockd harness {harness_pid} outlived its parent"
        assert not any(os.path.exists(d) for d in dirs), "temporary directories left behind"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_close_stops_the_process_and_removes_its_directories():
    c = redlockd.Cluster(2)  # the old name of Group still works
    assert isinstance(c, redlockd.Group)
    dirs = [n.dir for n in c.nodes]
    c.close()
    c.close()  # twice is fine
    assert wait_gone(c.pid)
    assert not any(os.path.exists(d) for d in dirs)


def _run_pytest(tmp_path, *args, env_extra=None):
    (tmp_path / "test_uses_fixture.py").write_text(
        "def test_it(redlockd_server):\n    assert redlockd_server.port > 0\n"
    )
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **(env_extra or {}))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_uses_fixture.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plugin_with_autoload_off_needs_dash_p(tmp_path):
    without = _run_pytest(tmp_path)
    assert without.returncode != 0
    assert "fixture 'redlockd_server' not found" in without.stdout
    loaded = _run_pytest(tmp_path, "-p", "redlockd")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "1 passed" in loaded.stdout


def test_another_binary_by_option_or_environment(tmp_path):
    missing = str(tmp_path / "no-such-redlockd")
    by_option = _run_pytest(tmp_path, "-p", "redlockd", "--redlockd-bin", missing)
    assert by_option.returncode != 0
    assert "no-such-redlockd" in by_option.stdout and "not an executable file" in by_option.stdout
    by_env = _run_pytest(tmp_path, "-p", "redlockd", env_extra={"REDLOCKD_BIN": missing})
    assert by_env.returncode != 0
    assert "REDLOCKD_BIN" in by_env.stdout
    real = redlockd.find_redlockd_bin()
    ok = _run_pytest(tmp_path, "-p", "redlockd", env_extra={"REDLOCKD_BIN": real})
    assert ok.returncode == 0, ok.stdout + ok.stderr
