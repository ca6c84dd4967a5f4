"""The kit's one lock (`evalkit.core.locks.exclusive`, filelock underneath) still excludes a second
holder where ``fcntl`` is missing (filelock's soft lock), and gives back a lock taken without waiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from evalkit.core import locks

NO_FCNTL = """
    import sys
    sys.modules["fcntl"] = None  # a platform without fcntl: importing it fails
    import warnings
    warnings.simplefilter("ignore")  # filelock warns that only its soft lock is available
    from pathlib import Path
    import filelock
    from evalkit.core import locks

    assert locks.FileLock is filelock.SoftFileLock, locks.FileLock
    path = Path(sys.argv[1])
    with locks.exclusive(path, "index") as taken:
        with locks.exclusive(path, "index", blocking=False) as second:
            print(taken, second)
    with locks.exclusive(path, "index", blocking=False) as after:
        print(after)
"""


def test_without_fcntl_a_second_holder_is_kept_out(tmp_path):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(NO_FCNTL), str(tmp_path / "x.lock")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True"]  # held: kept out; released: taken


def test_a_lock_held_keeps_a_second_holder_out_until_released(tmp_path):
    path = locks.lock_file(tmp_path / "index")
    assert path == tmp_path / "index.lock"
    with locks.exclusive(path, "index") as taken, locks.exclusive(path, "index", blocking=False) as second:
        assert (taken, second) == (True, False)
    with locks.exclusive(path, "index", blocking=False) as after:
        assert after
