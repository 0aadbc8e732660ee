"""What client certificates (mTLS) and Ed25519 (`v1a`) signatures cost a send
(issue 42): deliveries/s of one dispatcher, plain HTTP beside HTTPS, HTTPS
with a client certificate, and `v1a`, in one run.

For each scenario, as bench/brokers_bench.py does for HTTP: empty the relay
tables of the bench database, make ENDPOINTS endpoints, publish N events
(one delivery per endpoint each), start one `manage.py run_dispatcher
--drain` and wait for it. The receiver is bench/receiver.py with no delay,
serving the same app on three ports: plain HTTP, TLS, and TLS requiring a
client certificate (its CA, server and client certificates made here with
trustme). HTTPS endpoints trust that CA through their own `ca_bundle`, so
both HTTPS scenarios take the per-endpoint TLS path; the mTLS ones add a
client certificate. Scenarios run in the order given, --rounds times, after
the ceiling: as many plain aiohttp POSTs to the receiver's HTTP port, 512 in
flight, with no database and no signing (bench/ceiling.py).

    .venv/bin/python -m bench.endpoint_auth_bench                 # 1,000 events each
    .venv/bin/python -m bench.endpoint_auth_bench --quick         # 100 events each
    .venv/bin/python -m bench.endpoint_auth_bench --rev HEAD~3 --scenarios http-v1

Results go to stdout as a markdown table and to bench/out/auth-<time>.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import deliveries_bench as relay_bench

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ceiling.py

ENDPOINTS = 20  # as brokers_bench and instant20
# name -> (receiver port: http, tls or mtls; signing scheme)
SCENARIOS = {
    "http-v1": ("http", "v1"),
    "http-v1a": ("http", "v1a"),
    "https-v1": ("tls", "v1"),
    "https-mtls-v1": ("mtls", "v1"),
    "https-mtls-v1a": ("mtls", "v1a"),
}


def certificates_write(directory: Path) -> dict[str, str]:
    """A CA, the receiver's certificate for 127.0.0.1 and a client
    certificate, as files for the receiver and PEM text for the endpoints."""
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    client = ca.issue_cert("bench-client@example.com")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    server.private_key_pem.write_to_path(str(directory / "server.key"))
    return {
        "ca_bundle": ca.cert_pem.bytes().decode(),
        "client_cert": "".join(p.bytes().decode() for p in client.cert_chain_pems),
        "client_key": client.private_key_pem.bytes().decode(),
    }


def endpoints_make(*, url: str, signing: str, tls: dict | None) -> None:
    """Empty tables, then the bench merchant with ENDPOINTS endpoints at url/e<i>."""
    from endpoints.merchant_services import merchant_create
    from endpoints.services import endpoint_create

    relay_bench.tables_empty()
    merchant = merchant_create(slug="bench", name="Bench")
    merchant.max_in_flight = 100_000  # its own cap out of the way, as elsewhere
    merchant.save(update_fields=["max_in_flight"])
    now = datetime.now(UTC)
    extra = {} if signing == "v1" else {"signing": signing}
    for i in range(ENDPOINTS):
        endpoint = endpoint_create(
            merchant=merchant, url=f"{url}/e{i}", now=now, **extra
        )
        if tls is not None:
            from endpoints.client_credentials import tls_set

            tls_set(endpoint, tls)
            endpoint.save()


def run_scenario(
    name: str,
    *,
    events: int,
    db_url: str,
    timeout: float,
    receiver: relay_bench.ReceiverProcess,
    ports: dict[str, int],
    pems: dict[str, str],
) -> relay_bench.Result:
    port_kind, signing = SCENARIOS[name]
    scheme = "http" if port_kind == "http" else "https"
    tls = None
    if port_kind == "tls":
        tls = {"ca_bundle": pems["ca_bundle"]}
    elif port_kind == "mtls":
        tls = dict(pems)
    endpoints_make(
        url=f"{scheme}://127.0.0.1:{ports[port_kind]}", signing=signing, tls=tls
    )
    expected = events * ENDPOINTS
    relay_bench.events_make(events)
    relay_bench.analyze()
    receiver.reset()
    started = time.time()
    scenario = relay_bench.Scenario(name, port_kind, None, 1, events)
    procs = relay_bench.start_dispatchers(scenario, db_url=db_url, drain=True)
    watch = relay_bench.RssWatch(procs)
    notes = relay_bench.stop_all(procs, deadline=time.monotonic() + timeout)
    return relay_bench.drained_result(
        name,
        port_kind,
        expected=expected,
        received=receiver.dump(),
        started=started,
        notes=notes,
        watch=watch,
        peak=receiver.peak(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--events", type=int, default=1000, help="events each")
    parser.add_argument("--quick", action="store_true", help="100 events each")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--timeout", type=float, default=300, help="seconds each")
    parser.add_argument("--database-url", default=relay_bench.DEFAULT_DB)
    parser.add_argument(
        "--rev", default="HEAD", help="commit whose engine to measure (exported clean)"
    )
    parser.add_argument(
        "--tree", default="", help="measure this project tree as it is instead"
    )
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n]
    if unknown := set(names) - set(SCENARIOS):
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    if not args.database_url.rsplit("/", 1)[1].startswith("bench"):
        parser.error("use a database of its own whose name starts with 'bench'")
    if args.quick:
        args.events = 100
    if args.tree:
        relay_bench.ROOT, sha = Path(args.tree).resolve(), f"tree {args.tree}"
    else:
        relay_bench.ROOT, sha = relay_bench.tree_export(args.rev)
    info = relay_bench.machine()
    info["commit"] = sha
    relay_bench.database_prepare(args.database_url)
    relay_bench.django_setup(args.database_url)
    results: list[relay_bench.Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tls_dir:
        pems = certificates_write(Path(tls_dir))
        receiver = relay_bench.ReceiverProcess(["--delay", "0", "--tls-dir", tls_dir])
        words = receiver.first_line.split()
        ports = {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}
        ports["http"] = ports.pop("port")
        try:
            if not args.no_ceiling:
                results.append(
                    relay_bench.run_ceiling(
                        "http ceiling 512 in flight",
                        receiver,
                        count=max(args.events * ENDPOINTS, 1000),
                        in_flight=512,
                        m=ENDPOINTS,
                    )
                )
                print(relay_bench.table(results[-1:]).splitlines()[-1], flush=True)
            for _ in range(args.rounds):
                for name in names:
                    results.append(
                        run_scenario(
                            name,
                            events=args.events,
                            db_url=args.database_url,
                            timeout=args.timeout,
                            receiver=receiver,
                            ports=ports,
                            pems=pems,
                        )
                    )
                    print(relay_bench.table(results[-1:]).splitlines()[-1], flush=True)
        finally:
            receiver.stop()
    relay_bench.results_report("auth", info=info, args=args, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
