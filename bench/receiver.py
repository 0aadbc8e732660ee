"""A loopback webhook receiver for the benchmarks, run as its own process.

An aiohttp.web server (one event loop, so it holds thousands of keep-alive
connections at once) that answers every POST 200, after a delay that is one
of three kinds:

    --delay 0        instant
    --delay 0.1      a fixed 100 ms
    --mix            the realistic mix of issue 8: 60% 20-80 ms, 30% 150-400 ms,
                     8% 1-2 s, 2% 5 s, chosen by a hash of the webhook-id, so
                     every rerun (and the ceiling) sees the same latencies

It records the wall-clock receipt time of each (path, webhook-id), taken when
the request has fully arrived, before the delay. The bench reads the record
with GET /_dump and clears it with POST /_reset; GET /_peak is the most
requests it held at once since then (what the sender had in flight).

    python bench/receiver.py --port 0 --mix   # prints "port N" first

With --tls-dir DIR (server.pem, server.key and ca.pem, written by
bench/endpoint_auth_bench.py) the same app is also served over TLS on two
more ports, the second requiring a client certificate issued by ca.pem; the
first line is then "port N tls M mtls K".
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import ssl
import sys
import time
from pathlib import Path

from aiohttp import web

REPLY = b"ok"

# (share, low seconds, high seconds): the mix, cumulative in order.
MIX = ((0.60, 0.020, 0.080), (0.30, 0.150, 0.400), (0.08, 1.0, 2.0), (0.02, 5.0, 5.0))


def mix_delay(webhook_id: str) -> float:
    """The mix's latency for this webhook-id: the same on every run and host."""
    digest = hashlib.sha256(webhook_id.encode()).digest()
    pick = int.from_bytes(digest[:4], "big") / 2**32
    spot = int.from_bytes(digest[4:8], "big") / 2**32
    for share, low, high in MIX:
        if pick < share:
            return low + (high - low) * spot
        pick -= share
    return MIX[-1][2]


def mix_mean() -> float:
    return sum(share * (low + high) / 2 for share, low, high in MIX)


def app_make(*, delay: float, mix: bool) -> web.Application:
    received: list[tuple[str, str, float]] = []
    # Requests being answered now, and the most at once since the last reset:
    # how many the sender under test really had in flight.
    in_flight = {"now": 0, "peak": 0}

    async def reset(request: web.Request) -> web.Response:
        received.clear()
        in_flight["peak"] = in_flight["now"]
        return web.Response(body=b"{}")

    async def dump(request: web.Request) -> web.Response:
        return web.Response(body=json.dumps(received).encode())

    async def peak(request: web.Request) -> web.Response:
        return web.Response(body=json.dumps(in_flight["peak"]).encode())

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        # django-webhook (the peer, bench/peer/) sends no per-message id: its
        # body, which holds the object and the endpoint's uuid, stands in.
        wid = request.headers.get("webhook-id") or hashlib.sha256(body).hexdigest()
        received.append((request.path, wid, time.time()))
        wait = mix_delay(wid) if mix else delay
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        try:
            if wait:
                await asyncio.sleep(wait)  # the receiver under test, not a wait
        finally:
            in_flight["now"] -= 1
        return web.Response(body=REPLY)

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/_reset", reset)
    app.router.add_get("/_dump", dump)
    app.router.add_get("/_peak", peak)
    app.router.add_post("/{tail:.*}", hook)
    return app


def tls_contexts(tls_dir: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The server's contexts: one asking nothing of the client, one requiring
    a client certificate issued by the directory's CA (mTLS)."""
    contexts = []
    for required in (False, True):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls_dir / "server.pem", tls_dir / "server.key")
        if required:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(tls_dir / "ca.pem")
        contexts.append(context)
    return contexts[0], contexts[1]


async def serve(
    *, port: int, delay: float, mix: bool, tls_dir: Path | None = None
) -> None:
    runner = web.AppRunner(app_make(delay=delay, mix=mix), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    line = f"port {site._server.sockets[0].getsockname()[1]}"
    if tls_dir is not None:
        for name, context in zip(("tls", "mtls"), tls_contexts(tls_dir), strict=True):
            tls_site = web.TCPSite(
                runner, "127.0.0.1", 0, backlog=4096, ssl_context=context
            )
            await tls_site.start()
            line += f" {name} {tls_site._server.sockets[0].getsockname()[1]}"
    print(line, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--mix", action="store_true", help="the realistic latency mix")
    parser.add_argument("--tls-dir", type=Path, default=None, help="also serve TLS")
    args = parser.parse_args(argv)
    try:
        asyncio.run(
            serve(port=args.port, delay=args.delay, mix=args.mix, tls_dir=args.tls_dir)
        )
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
