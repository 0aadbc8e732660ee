"""A wall-clock sampling profiler for a Python program, every thread (no py-spy here).

    .venv/bin/python bench/sampler.py -o out.txt -- manage.py run_dispatcher --drain
    .venv/bin/python bench/sampler.py --report out.txt

Runs the script in this interpreter with a thread that reads every other
thread's stack (sys._current_frames) HZ times a second, and writes the
collapsed stacks ("thread;outer;...;inner count", flame-graph format) when
the program exits. Samples are wall-clock, not on-CPU: a thread waiting on
PostgreSQL or in epoll shows where it waits, which is the point for a
dispatcher whose threads mostly wait. The sampler holds the GIL while it
reads, so keep HZ modest (the default costs a few per cent).

--report prints, per thread, the share of its samples spent in (cumulative)
each function, with the leaf functions it waits in most.
"""

from __future__ import annotations

import argparse
import atexit
import runpy
import sys
import threading
import time
from collections import Counter
from pathlib import Path

HZ = 100


def frame_name(frame) -> str:
    code = frame.f_code
    path = code.co_filename
    for marker in ("site-packages/", "/deliveries/", "/relayproject/", "/endpoints/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker != "site-packages/":
                path = marker.strip("/") + "/" + path
            break
    else:
        path = Path(path).name
    return f"{code.co_name} ({path}:{code.co_firstlineno})"


class Sampler:
    def __init__(self, hz: float, out: Path) -> None:
        self.interval = 1 / hz
        self.out = out
        self.stacks: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()
        atexit.register(self.write)

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                parts = []
                while frame is not None:
                    parts.append(frame_name(frame))
                    frame = frame.f_back
                thread = names.get(ident, str(ident)).split("_")[0]
                self.stacks[";".join([thread, *reversed(parts)])] += 1

    def write(self) -> None:
        self._stop.set()
        self.out.write_text(
            "".join(f"{stack} {n}\n" for stack, n in self.stacks.most_common())
        )


def report(path: Path, *, top: int = 25) -> None:
    by_thread: dict[str, Counter[str]] = {}
    leaves: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        thread, *frames = stack.split(";")
        count = int(n)
        totals[thread] += count
        cumulative = by_thread.setdefault(thread, Counter())
        for name in set(frames):
            cumulative[name] += count
        if frames:
            leaves.setdefault(thread, Counter())[frames[-1]] += count
    for thread, total in totals.most_common():
        print(f"\n== thread {thread}: {total} samples")
        for name, count in by_thread[thread].most_common(top):
            print(f"  {100 * count / total:5.1f}%  {name}")
        print("  -- leaves (where it is when sampled):")
        for name, count in leaves.get(thread, Counter()).most_common(8):
            print(f"  {100 * count / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--hz", type=float, default=HZ)
    parser.add_argument("--report", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("script", nargs="?")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    if options.report:
        report(options.report, top=options.top)
        return
    sys.argv = [options.script, *options.args]
    sys.path.insert(0, str(Path(options.script).resolve().parent))
    Sampler(options.hz, options.out.resolve()).start()
    started = time.monotonic()
    try:
        runpy.run_path(options.script, run_name="__main__")
    finally:
        print(f"sampled {time.monotonic() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
