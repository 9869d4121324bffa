"""Subscribes to pgherald's subjects on a NATS server and measures, per
message, receipt minus the event's `at` (the trigger's clock, just before
commit). Ends once no message has come for IDLE seconds after the first, or
after LIMIT seconds, and prints one JSON object:
{"received", "seconds" (first to last receipt), "p50Milliseconds", "p99Milliseconds"}.

    consume_latency.py nats://127.0.0.1:PORT SUBJECT [IDLE] [LIMIT]

Used by scripts/bench; written with nats-py, independently of pgherald.
"""
import asyncio
import datetime
import json
import sys
import time

import nats


async def main(url, subject, idle, limit):
    latencies = []
    first = last = None

    async def received(message):
        nonlocal first, last
        now = time.time()
        first = first or now
        last = now
        at = json.loads(message.data)["at"]
        stamp = datetime.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        latencies.append((now - stamp) * 1000)

    connection = await nats.connect(url, connect_timeout=5)
    await connection.subscribe(subject, cb=received)
    print("ready", file=sys.stderr, flush=True)
    started = time.time()
    while time.time() - started < limit:
        await asyncio.sleep(0.2)
        if last is not None and time.time() - last > idle:
            break
    await connection.close()
    latencies.sort()

    def percentile(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2) if latencies else None

    print(json.dumps({
        "received": len(latencies),
        "seconds": round((last - first), 3) if first else 0,
        "p50Milliseconds": percentile(0.5),
        "p99Milliseconds": percentile(0.99),
    }))


asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 3, float(sys.argv[4]) if len(sys.argv) > 4 else 120))
