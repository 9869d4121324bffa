"""Prints every message of a JetStream stream as one JSON line, in stream order.

    read_stream.py nats://127.0.0.1:PORT STREAM [--nkey SEED_FILE | --creds CREDS_FILE]

Each line: {"seq", "subject", "msg_id", "count", "data"}. Written with
nats-py, independently of pgherald's own NATS client.
"""
import asyncio
import json
import sys

import nats


async def main(url, stream, *auth):
    options = {}
    if auth[:1] == ("--nkey",):
        options["nkeys_seed"] = auth[1]
    elif auth[:1] == ("--creds",):
        options["user_credentials"] = auth[1]
    connection = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0, **options)
    try:
        js = connection.jetstream()
        info = await js.stream_info(stream)
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                message = await js.get_msg(stream, seq)
            except nats.js.errors.NotFoundError:
                continue
            headers = message.headers or {}
            print(json.dumps({
                "seq": seq,
                "subject": message.subject,
                "msg_id": headers.get("Nats-Msg-Id"),
                "count": headers.get("Pgherald-Count"),
                "data": message.data.decode(),
            }))
    finally:
        await connection.close()


asyncio.run(main(*sys.argv[1:]))
