"""What tracing costs a dispatcher (issue 13): off, SDK without export, OTLP to a sink.

One backlog drained by one `run_dispatcher --drain` at its defaults, on the
instant loopback receiver, three ways, repeated and interleaved so the shared
machine's noise falls on all three alike:

  off      no OTEL_* variable: the OpenTelemetry API's no-op tracer
  sdk      OTEL_TRACES_EXPORTER=none: spans made and sampled, not exported
  otlp     OTEL_EXPORTER_OTLP_ENDPOINT at a local sink (this script) that
           accepts and discards each export, as a collector on loopback would

    .venv/bin/python bench/tracing_overhead.py [--events 3000] [--rounds 3]

Uses bench/deliveries_bench.py's database, receiver and summary helpers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import deliveries_bench as bench  # noqa: E402


class DiscardingSink:
    """Answers every OTLP/HTTP export with 200 and counts the bytes."""

    def __init__(self) -> None:
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                sink.bytes += len(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def modes(sink: DiscardingSink) -> dict[str, dict[str, str]]:
    return {
        "off": {},
        "sdk": {"OTEL_TRACES_EXPORTER": "none"},
        "otlp": {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--endpoints", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=bench.DEFAULT_DB)
    parser.add_argument("--tree", default="", help="measure this tree as it is")
    args = parser.parse_args(argv)
    bench.ROOT = (
        Path(args.tree).resolve() if args.tree else bench.tree_export("HEAD")[0]
    )

    sink = DiscardingSink()
    extra: dict[str, str] = {}
    base_env = bench.dispatcher_env

    def env_with_tracing(db_url: str) -> dict[str, str]:
        env = base_env(db_url)
        for name in [n for n in env if n.startswith("OTEL_")]:
            del env[name]
        env.update(extra)
        return env

    bench.dispatcher_env = env_with_tracing
    bench.database_prepare(args.database_url)
    bench.django_setup(args.database_url)
    receiver = bench.ReceiverProcess(bench.RECEIVERS["instant"][0])
    info = bench.machine()
    rates: dict[str, list[float]] = {name: [] for name in modes(sink)}
    results = []
    try:
        for round_no in range(args.rounds):
            for name, env in modes(sink).items():
                extra.clear()
                extra.update(env)
                s = bench.Scenario(
                    f"{name} #{round_no + 1}", "instant", None, 1, args.events
                )
                result = run_default(
                    s, receiver, db_url=args.database_url, m=args.endpoints
                )
                rates[name].append(result.rate)
                results.append(result)
                print(bench.table([result]).splitlines()[-1], flush=True)
    finally:
        receiver.stop()
    print(f"\nmachine: {info}\nOTLP bytes received by the sink: {sink.bytes}\n")
    print("| tracing | deliveries/s (median of rounds) | each round |")
    print("|---|---:|---|")
    for name, values in rates.items():
        print(
            f"| {name} | {statistics.median(values):.0f} | "
            f"{', '.join(f'{v:.0f}' for v in values)} |"
        )
    return 0


def run_default(s, receiver, *, db_url: str, m: int):
    """bench.run_backlog, with the dispatcher at its default concurrency."""
    bench.relay_reset(base=receiver.base, endpoints=m)
    bench.events_make(s.events)
    bench.analyze()
    receiver.reset()
    started = time.time()
    import subprocess

    proc = subprocess.Popen(
        [bench.PYTHON, "manage.py", "run_dispatcher", "--skip-checks", "--drain"],
        cwd=bench.ROOT,
        env=bench.dispatcher_env(db_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    notes = bench.stop_all([proc], deadline=time.monotonic() + 300)
    result = bench.summarise(
        s.name,
        "relay",
        expected=s.events * m,
        received=receiver.dump(),
        started=started,
        created=bench.created_at_by_event(),
    )
    result.notes += notes
    return result


if __name__ == "__main__":
    raise SystemExit(main())
