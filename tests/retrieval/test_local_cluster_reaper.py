"""The reaper of a local Ray cluster (`evalkit.core.process_guard.reap`), without Ray: a process
tree the driver did not start under a guard (as `ray.init` starts the GCS and the raylet, which
start Ray's agents), reaped when the driver is SIGKILLed, on SIGTERM, and left to exit by itself
when the tree ends on its own. Seconds in all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from evalkit.core.process_guard import reaping

TREE = ["sh", "-c", "sleep 300 & sleep 300 & wait"]  # a process that starts two (Ray's raylet and its agents)
DRIVER = f"""
import subprocess, sys, time
from evalkit.core.process_guard import reaping
tree = subprocess.Popen({TREE!r})
reaper = subprocess.Popen(reaping([tree.pid]), start_new_session=True, stdout=subprocess.DEVNULL)
print(tree.pid, reaper.pid, flush=True)
time.sleep(300)
"""


def tree_of(pid: int) -> list[psutil.Process]:
    """`pid` and its two sleeping children, once both are there."""
    root, deadline = psutil.Process(pid), time.monotonic() + 10
    while len(root.children()) < 2:
        assert time.monotonic() < deadline, "the tree never started its children"
        time.sleep(0.02)
    return [root, *root.children()]


def gone(processes: list[psutil.Process], within: float) -> bool:
    deadline = time.monotonic() + within
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_sigkilled_driver_takes_the_tree_it_did_not_guard_with_it():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True, env=env)
    started: list[psutil.Process] = []
    try:
        root, reaper = map(int, driver.stdout.readline().split())
        started = [*tree_of(root), psutil.Process(reaper)]
        time.sleep(0.6)  # the reaper has read the process table once (every REAP_POLL_S)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert gone(started, within=5), [p.pid for p in started if p.is_running()]
    finally:
        driver.kill()
        for process in started:  # nothing this test started outlives it; nothing else of the suite's is touched
            with contextlib.suppress(psutil.Error):  # (its multiprocessing resource tracker was killed so once)
                process.kill()


def test_sigterm_reaps_the_tree_and_a_tree_that_ends_by_itself_ends_the_reaper():
    tree = subprocess.Popen(TREE)
    processes = tree_of(tree.pid)
    reaper = subprocess.Popen(reaping([tree.pid]), start_new_session=True)
    time.sleep(0.6)
    reaper.terminate()  # RayExecutor.close, after Ray's own shutdown
    assert reaper.wait(10) == 0 and gone(processes, within=5)
    tree.wait()
    tree = subprocess.Popen(["sleep", "0.3"])
    reaper = subprocess.Popen(reaping([tree.pid]), start_new_session=True)
    assert reaper.wait(10) == 0 and tree.wait() == 0  # the tree ended on its own: the reaper with it
