"""Supabase's own Python realtime client, signed in as two users, against
pgherald with row-level security on (rls: true).

Run by the Swift integration test RowSecurityTests, which creates the table
`todo` with an owner policy and starts the daemon. Each user must receive
exactly the changes to their own rows: inserts, updates, a row handed to
the other user (a DELETE for the one who loses it), and deletes. Exits
non-zero with the reason on the first check that fails.
"""

import argparse
import asyncio

from realtime import AsyncRealtimeClient

import checks
from checks import check, psql, subscribed, wait_for


async def signed_in(port, token, topic, inbox):
    client = AsyncRealtimeClient(f"ws://127.0.0.1:{port}/realtime/v1", token)
    await client.connect()
    channel = client.channel(topic)
    channel.on_postgres_changes("*", schema="public", table="todo", callback=inbox.append)
    await subscribed(channel)
    return client


def summary(payload):
    data = payload["data"]
    row = data["old_record"] if "old_record" in data and "record" not in data else data["record"]
    check("secret" not in row and all(c["name"] != "secret" for c in data["columns"]), "no column the role may not select", data)
    kind = getattr(data["type"], "value", data["type"])  # the client turns it into its enum
    return f"{kind} {row['id']}"


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alice", required=True)
    parser.add_argument("--bob", required=True)
    parser.add_argument("--dsn", required=True)
    arguments = parser.parse_args()
    checks.DSN = arguments.dsn
    alices, bobs = [], []
    alice = await signed_in(arguments.port, arguments.alice, "alice", alices)
    bob = await signed_in(arguments.port, arguments.bob, "bob", bobs)

    psql("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1'), (2, 'bob', 'bread', 's2')")
    psql("UPDATE todo SET title = 'oat milk' WHERE id = 1")
    psql("UPDATE todo SET owner = 'bob' WHERE id = 1")
    psql("DELETE FROM todo WHERE id = 1")
    psql("DELETE FROM todo WHERE id = 2")
    await wait_for(alices, 3, "alice's changes")
    await wait_for(bobs, 4, "bob's changes")
    await asyncio.sleep(0.5)
    seen_by_alice, seen_by_bob = [summary(p) for p in alices], [summary(p) for p in bobs]
    check(seen_by_alice == ["INSERT 1", "UPDATE 1", "DELETE 1"], "alice sees her row, and its removal when it goes to bob", seen_by_alice)
    check(seen_by_bob == ["INSERT 2", "UPDATE 1", "DELETE 1", "DELETE 2"], "bob sees his row, the one he is given, and the deletes", seen_by_bob)
    check(alices[2]["data"]["old_record"]["owner"] == "alice", "alice's DELETE carries her old row", alices[2])
    await alice.close()
    await bob.close()
    print("OK", flush=True)


asyncio.run(main())
