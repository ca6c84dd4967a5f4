"""A guard between the kit and a long-lived process it starts (a vLLM server): that process and
everything it starts end with the kit, however the kit ends.

``python -I process_guard.py PARENT_PID COMMAND [ARG ...]`` (`guarded` builds that argument list;
the kit starts it with ``start_new_session=True``, so the guard leads a process group of its
own) runs COMMAND as its child, in the guard's group, and waits. The whole group (the command
and its workers: vLLM's engine processes are the server's children) is ended when

- the kit's process ends, however it ends (SIGKILL included): the guard sees its parent change
  (`os.getppid`, every `POLL_S` seconds), so no signal has to reach it;
- the guard receives SIGTERM, SIGHUP or SIGINT (the kit's `stop` signals the group);
- the command exits by itself: what it left running is ended, and the guard exits with the
  command's status, so the kit reports the command's own exit.

Should the guard itself be killed outright before it could end the group (SIGKILL to the guard:
Ray, for one, kills a killed actor's child processes), the command gets SIGKILL from the
kernel (Linux: ``PR_SET_PDEATHSIG``), so the server never outlives both; processes the command
started then end by their own parent checks (vLLM's engine processes watch their server).

Ending the group: SIGTERM to every member, `GRACE_S` seconds for the command to exit, then
SIGKILL to the whole group. The members are found as the processes of the guard's process
group (psutil lists the processes; `os.getpgid` gives each one's group).

The same file is the reaper of processes the kit did not start under a guard (a local Ray
cluster: `ray.init` starts its GCS and raylet as the kit's children, and the raylet starts Ray's
dashboard and runtime-env agents, which outlive a SIGKILLed driver by about 60 s, waiting on the
dead GCS). ``python -I process_guard.py --reap PARENT_PID PID [PID ...]`` (`reaping` builds that
argument list; the kit starts it in a session of its own, so a terminal's Ctrl-C leaves it to do
its job) tracks those processes and every process they start (the process table read every
`REAP_POLL_S` seconds: a process reparented when its parent dies stays tracked), and SIGKILLs
every tracked process still running when the kit's process ends, however it ends, or when the
reaper receives SIGTERM (the kit's `close`, after Ray's own shutdown); it exits by itself once
none of them runs.

Run by path with the standard library and psutil only (``-I``: no environment, no user site, not
the kit's package), so the guard starts in milliseconds and does not depend on the kit importing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

POLL_S = 0.2
REAP_POLL_S = 0.5  # the reaper's look at the process table (a late process it misses dies with its parent)
GRACE_S = 20.0
CANNOT_START = 127  # the shell's status for a command that cannot run


def guarded(argv: list[str]) -> list[str]:
    """The argument list that runs `argv` under a guard watching this process."""
    return [sys.executable, "-I", str(Path(__file__).resolve()), str(os.getpid()), *argv]


def _members(group: int) -> list[int]:
    """The other live processes of process group `group`; a zombie has ended already, whoever reaps it."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.pid != os.getpid() and proc.info["status"] != psutil.STATUS_ZOMBIE \
                    and os.getpgid(proc.pid) == group:
                found.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):  # ended meanwhile, or not ours to see
            continue
    return found


def _signal_others(group: int, sig: int) -> None:
    """`sig` to every process of the group but the guard."""
    for pid in _members(group):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_group(child: subprocess.Popen | None, group: int) -> None:
    """SIGTERM to the group, up to `GRACE_S` for it to exit, then SIGKILL to what is left."""
    _signal_others(group, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and ((child is not None and child.poll() is None) or _members(group)):
        time.sleep(0.05)
    _signal_others(group, signal.SIGKILL)


PR_SET_PDEATHSIG = 1


def _die_with_guard(guard: int):
    """A preexec function: the command gets SIGKILL when the guard dies (Linux; elsewhere nothing)."""
    def arm() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl: not Linux
            return
        if os.getppid() != guard:  # the guard died before the signal was armed
            os._exit(1)
    return arm


class _Stop(Exception):
    pass


def _stop(signum, frame):
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # once: the group's own SIGTERM reaches the guard too
        signal.signal(sig, signal.SIG_IGN)
    raise _Stop(signum)


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    group, child = os.getpgid(0), None
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, _stop)
        if os.getppid() != parent:  # the kit ended before the guard started
            return 1
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_guard(os.getpid()) if sys.platform == "linux" else None)
        except OSError as exc:
            print(f"cannot start {command[0]}: {exc.strerror or exc}", flush=True)
            return CANNOT_START
        while True:
            if os.getppid() != parent:  # the kit's process is gone, however it ended
                _stop(signal.SIGTERM, None)
            try:
                status = child.wait(POLL_S)
            except subprocess.TimeoutExpired:
                continue
            _signal_others(group, signal.SIGKILL)  # what the command left running
            return status if status >= 0 else 128 - status
    except _Stop as stop:
        end_group(child, group)
        return 128 + stop.args[0]


def reaping(pids) -> list[str]:
    """The argument list of a reaper of `pids` and their descendants, watching this process."""
    return [sys.executable, "-I", str(Path(__file__).resolve()), "--reap", str(os.getpid()), *map(str, pids)]


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _descendants(roots: set[psutil.Process]) -> set[psutil.Process]:
    """Every process started by one of `roots` or by one of those, from one read of the process table."""
    below: dict[int, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["ppid"]):
        below.setdefault(proc.info["ppid"], []).append(proc)
    found: set[psutil.Process] = set()
    todo = [root.pid for root in roots]
    while todo:
        for child in below.get(todo.pop(), []):
            if child not in found and child.pid != os.getpid():
                found.add(child)
                todo.append(child.pid)
    return found


def reap(parent: int, pids: list[int]) -> int:
    """The reaper (module docstring): track `pids` and their descendants while `parent` lives;
    SIGKILL what still runs of them when it is gone or on SIGTERM; 0 once none runs."""
    tracked: set[psutil.Process] = set()
    for pid in pids:
        try:
            tracked.add(psutil.Process(pid))
        except psutil.Error:  # ended already
            pass
    try:
        signal.signal(signal.SIGTERM, _stop)
        while True:
            tracked = {p for p in tracked if _running(p)}
            if os.getppid() != parent:  # the kit's process is gone, however it ended
                _stop(signal.SIGTERM, None)
            if not tracked:
                return 0
            tracked |= _descendants(tracked)
            time.sleep(REAP_POLL_S)
    except _Stop:
        for process in tracked:
            try:
                process.kill()  # psutil checks the pid still names the process it tracked
            except psutil.Error:
                pass
        deadline = time.monotonic() + GRACE_S  # until each is dead (a zombie is: its parent reaps it, not us)
        while any(_running(p) for p in tracked) and time.monotonic() < deadline:
            time.sleep(0.05)
        return 0


if __name__ == "__main__":
    sys.exit(reap(int(sys.argv[2]), [int(p) for p in sys.argv[3:]]) if sys.argv[1:2] == ["--reap"]
             else main(sys.argv[1:]))
