"""The README's five-minute tour, and the docs' walk through the API with
curl, run as a new user would run them.

The tree is copied as a fresh clone would have it (the files git knows, no
database, no development key), with the project's .venv linked in, so
`make run` installs nothing. `make run` serves it on a free port in an
environment with none of the tests' settings. The ```sh blocks between the
README's tour markers run in order in one bash, with `set -e`: every command
must exit 0; `listen` forwards the published event to the tour's handler,
which verifies it, and the last line is what `listen` said as it ended its
session. Then the ```sh blocks of docs/pages/api/curl-tour.md run the same
way against the same relay, ending with what the demo receiver verified.
Last, SIGINT, as Ctrl-C would send to the terminal's process group, must
stop web and dispatcher both.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import ROOT, wait_until

pytestmark = pytest.mark.acceptance

TOUR_START = "<!-- tour:start -->"
TOUR_END = "<!-- tour:end -->"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
CURL_TOUR = Path("docs/pages/api/curl-tour.md")
START_SECONDS = 90  # migrate on a fresh SQLite file, then both processes
TOUR_SECONDS = 60
# What `listen` prints as the tour stops it: its session ended, the one
# event the tour published acked.
LISTEN_ENDED = re.compile(r"Stopped: listen session \S+ ended; 1 acked, 0 nacked\.")


def tour_blocks(readme: str) -> list[str]:
    """The tour's shell blocks, in the order the README gives them."""
    start, end = readme.index(TOUR_START), readme.index(TOUR_END)
    return SH_BLOCK.findall(readme[start:end])


@dataclass(frozen=True)
class Ran:
    returncode: int | None  # None: still running at TOUR_SECONDS
    stdout: str
    stderr: str


def run_blocks(blocks: list[str], *, tree: Path, env: dict[str, str], log: Path) -> Ran:
    """The blocks in order in one bash with `set -e`, as pasted into a
    terminal, in a process group of its own. What they started in the
    background (`listen`, the handler) is killed with the group once bash
    ends, so a tour that stops half-way leaves nothing running. Output goes
    to files: a background child holding a pipe would keep it open."""
    out, err = log.with_suffix(".out"), log.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-c", "set -e\n" + "\n".join(blocks)],
            cwd=tree,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            returncode = shell.wait(timeout=TOUR_SECONDS)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    return Ran(returncode, out.read_text(), err.read_text())


def fresh_clone(destination: Path) -> Path:
    """The working tree's files as a clone would have them, and the .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (destination / ".venv").symlink_to(ROOT / ".venv")
    return destination


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def newcomer_env(home: Path, port: int) -> dict[str, str]:
    # A shell's environment, without DEBUG, keys or databases of the tests;
    # the tour's handler on a free port rather than 3000, which may be taken.
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PORT": str(port),
        "HANDLER_PORT": str(free_port()),
    }


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_readme_tour_runs_as_written(tmp_path):
    blocks = tour_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 5, "the tour's ```sh blocks were found"
    curl_blocks = SH_BLOCK.findall((ROOT / CURL_TOUR).read_text())
    assert len(curl_blocks) >= 5, "the curl walk's ```sh blocks were found"
    tree = fresh_clone(tmp_path / "clone")
    port = free_port()
    env = newcomer_env(tmp_path, port)
    log = (tmp_path / "make-run.log").open("wb")
    server = subprocess.Popen(
        ["make", "run"],
        cwd=tree,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: (
                answers(f"http://127.0.0.1:{port}/healthz") or server.poll() is not None
            ),
            timeout=START_SECONDS,
            what="make run to serve",
        )
        assert server.poll() is None, (tmp_path / "make-run.log").read_text()[-3000:]
        tour = run_blocks(blocks, tree=tree, env=env, log=tmp_path / "tour")
        assert tour.returncode == 0, f"{tour.stdout[-3000:]}\n{tour.stderr[-3000:]}"
        assert re.search(r"^verified order\.paid evt_", tour.stdout, re.MULTILINE)
        assert LISTEN_ENDED.fullmatch(tour.stdout.rstrip().splitlines()[-1]), (
            tour.stdout[-3000:]
        )
        walk = run_blocks(curl_blocks, tree=tree, env=env, log=tmp_path / "walk")
        assert walk.returncode == 0, f"{walk.stdout[-3000:]}\n{walk.stderr[-3000:]}"
        assert walk.stdout.rstrip().endswith("signature verified (current secret)")
        # Ctrl-C: SIGINT to the terminal's process group stops both.
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)
        wait_until(
            lambda: group_gone(server.pid),
            timeout=30,
            what="web and dispatcher to stop",
        )
    finally:
        if server.poll() is None or not group_gone(server.pid):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
