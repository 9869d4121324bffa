"""What the realtime client scripts share: the failing check, waits, joins
and writes through psql. Imported by the scripts beside it."""

import asyncio
import json
import subprocess
import sys

# The database the scripts write to; each script's main sets it from --dsn.
DSN = ""


def psql(sql):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DSN, "-c", sql], check=True, capture_output=True)


def check(condition, message, *details):
    """Exits non-zero with the reason, as the Swift test reads it, when condition fails."""
    if not condition:
        print("FAIL:", message, *[json.dumps(d, default=str) for d in details], file=sys.stderr, flush=True)
        sys.exit(1)


async def wait_for(inbox, count, what, timeout=15):
    for _ in range(int(timeout * 20)):
        if len(inbox) >= count:
            return
        await asyncio.sleep(0.05)
    check(False, f"expected {count} {what}, got {len(inbox)}", inbox)


async def subscribed(channel):
    """Joins, and fails the run unless the server says SUBSCRIBED within 10 s."""
    ready = asyncio.Event()
    problems = []

    def on_status(status, error):
        if str(status).endswith("SUBSCRIBED"):
            ready.set()
        elif error is not None:
            problems.append(str(error))

    await channel.subscribe(on_status)
    try:
        await asyncio.wait_for(ready.wait(), 10)
    except asyncio.TimeoutError:
        check(False, f"{channel.topic} never subscribed", problems)
