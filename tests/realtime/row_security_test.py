"""Supabase's own Python realtime client, signed in as two users, against
pgherald with row-level security on (rls: true).

Run by the Swift integration tests RowSecurityTests and NetworkTests (over
wss through http.listen), which create the table
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


async def signed_in(url, token, topic, inbox):
    client = AsyncRealtimeClient(url, token)
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
    parser.add_argument("--port", type=int, help="realtime.listen's port")
    parser.add_argument("--url", help="the realtime URL instead, such as wss://localhost:8443/realtime/v1 (SSL_CERT_FILE trusts a test CA)")
    parser.add_argument("--alice", required=True)
    parser.add_argument("--bob", required=True)
    parser.add_argument("--dsn", required=True)
    arguments = parser.parse_args()
    checks.DSN = arguments.dsn
    url = arguments.url or f"ws://127.0.0.1:{arguments.port}/realtime/v1"
    alices, bobs = [], []
    alice = await signed_in(url, arguments.alice, "alice", alices)
    bob = await signed_in(url, arguments.bob, "bob", bobs)

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
