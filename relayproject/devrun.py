"""`make run`: the dev server and one dispatcher together; Ctrl-C stops both.

A tiny supervisor rather than shell job control, so that SIGINT from the
terminal and SIGTERM from anything else stop both children cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(host: str = "127.0.0.1", port: str = "8000") -> int:
    env = {**os.environ, "RELAY_ALLOW_PRIVATE_DESTINATIONS": "true"}
    manage = [sys.executable, "manage.py"]
    children = [
        subprocess.Popen([*manage, "run_dispatcher"], env=env),
        subprocess.Popen(
            [*manage, "runserver", "--noreload", f"{host}:{port}"], env=env
        ),
    ]

    def stop(*_args) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # When either child ends (crash or signal), stop the other too.
    while all(child.poll() is None for child in children):
        try:
            os.wait()
        except ChildProcessError:
            break
    stop()
    for child in children:
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
