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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
