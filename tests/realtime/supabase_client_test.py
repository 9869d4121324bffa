"""Supabase's own Python realtime client against a running pgherald.

Run by the Swift integration test RealtimeClientTests, which starts the
daemon and restarts it when this script prints RESTART (then answers on
stdin). Writes go through psql to the database --dsn names. Exits
non-zero with the reason on the first check that fails.
"""

import argparse
import asyncio
import json
import re
import sys

import websockets
from realtime import AsyncRealtimeClient

import checks
from checks import check, psql, subscribed, wait_for


TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def check_change(payload, kind, table, record=None, old_record=None):
    data = payload["data"]
    check(data["type"] == kind, f"type is {kind}", data)
    check(data["schema"] == "public" and data["table"] == table, "schema and table", data)
    check(TIMESTAMP.match(data["commit_timestamp"]), "commit_timestamp is UTC with milliseconds", data)
    check(data["errors"] is None, "errors is null", data)
    names = [column["name"] for column in data["columns"]]
    check(all(isinstance(column["type"], str) and column["type"] for column in data["columns"]), "every column has its type", data)
    if record is not None:
        check(all(data["record"].get(k) == v for k, v in record.items()), "record", record, data)
        check(list(data["record"].keys()) == names, "record has every column, in order", data)
    else:
        check("record" not in data, "no record on DELETE", data)
    if old_record is not None:
        check(all(data["old_record"].get(k) == v for k, v in old_record.items()), "old_record", old_record, data)
        check(list(data["old_record"].keys()) == names, "old_record is the complete row", data)
    else:
        check("old_record" not in data, "no old_record on INSERT", data)


async def over_tcp(port, key):
    client = AsyncRealtimeClient(f"ws://127.0.0.1:{port}/realtime/v1", key, initial_backoff=0.5, max_retries=30)
    await client.connect()
    everything, filtered, deletes = [], [], []
    wide = client.channel("school")
    wide.on_postgres_changes("*", schema="public", callback=everything.append)
    await subscribed(wide)
    narrow = client.channel("narrow")
    narrow.on_postgres_changes("UPDATE", schema="public", table="course", filter="short_code=eq.ICS4U", callback=filtered.append)
    # DELETE filters read the old row, which Supabase itself cannot do.
    narrow.on_postgres_changes("DELETE", schema="public", table="course", filter="short_code=in.(GONE,ALSO)", callback=deletes.append)
    await subscribed(narrow)

    psql("INSERT INTO course (short_code, name) VALUES ('ICS4U', 'Computer Science'), ('GONE', 'Soon deleted'), ('KEEP', 'Kept')")
    psql("UPDATE course SET name = 'CS' WHERE short_code = 'ICS4U'")
    psql("UPDATE course SET name = 'Other' WHERE short_code = 'KEEP'")
    psql("DELETE FROM course WHERE short_code IN ('GONE', 'KEEP')")
    await wait_for(everything, 7, "changes on the * binding")
    kinds = [p["data"]["type"] for p in everything]
    check(kinds == ["INSERT"] * 3 + ["UPDATE"] * 2 + ["DELETE"] * 2, "INSERT, UPDATE, DELETE in order", kinds)
    check_change(everything[0], "INSERT", "course", record={"short_code": "ICS4U", "name": "Computer Science"})
    check_change(everything[3], "UPDATE", "course", record={"name": "CS"}, old_record={"short_code": "ICS4U", "name": "Computer Science"})
    check_change(everything[5], "DELETE", "course", old_record={"short_code": "GONE", "name": "Soon deleted"})
    await wait_for(filtered, 1, "filtered updates")
    await wait_for(deletes, 1, "filtered deletes")
    await asyncio.sleep(0.5)
    check(len(filtered) == 1 and filtered[0]["data"]["record"]["short_code"] == "ICS4U", "the eq filter passes one update", filtered)
    check(len(deletes) == 1 and deletes[0]["data"]["old_record"]["short_code"] == "GONE", "the DELETE filter reads the old row", deletes)

    # A 20 kB row, whole.
    body = "x" * 20_000
    psql("CREATE TABLE IF NOT EXISTS note (id serial PRIMARY KEY, body text)")
    psql(f"INSERT INTO note (body) VALUES ('{body}')")
    await wait_for(everything, 8, "the 20 kB row")
    check_change(everything[7], "INSERT", "note", record={"body": body})

    # The daemon restarts; the client reconnects and rejoins by itself.
    print("RESTART", flush=True)
    answer = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    check(answer.strip() == "restarted", "the test restarted the daemon", answer)
    for attempt in range(60):
        psql(f"INSERT INTO course (short_code, name) VALUES ('AFTER{attempt}', 'after the restart')")
        await asyncio.sleep(0.5)
        if len(everything) > 8:
            break
    check(len(everything) > 8, "changes arrive after the daemon restarted", len(everything))
    check_change(everything[8], "INSERT", "course", record={"name": "after the restart"})
    await client.close()


async def over_unix_socket(path, key):
    """The same endpoint on the Unix socket, in vsn 2.0.0 array frames."""
    async with websockets.unix_connect(path, uri=f"ws://localhost/realtime/v1/websocket?vsn=2.0.0&apikey={key}") as socket:
        join = {"config": {"postgres_changes": [{"event": "INSERT", "schema": "public", "table": "student"}]}}
        await socket.send(json.dumps(["1", "1", "realtime:unix", "phx_join", join]))
        reply = json.loads(await socket.recv())
        check(reply[:4] == ["1", "1", "realtime:unix", "phx_reply"] and reply[4]["status"] == "ok", "join reply", reply)
        binding_id = reply[4]["response"]["postgres_changes"][0]["id"]
        check(isinstance(binding_id, int) and binding_id != 0, "the binding's id is a non-zero integer", reply)
        system = json.loads(await socket.recv())
        check(system[3] == "system" and system[4]["status"] == "ok", "subscribed", system)
        await socket.send(json.dumps([None, "2", "phoenix", "heartbeat", {}]))
        check(json.loads(await socket.recv()) == [None, "2", "phoenix", "phx_reply", {"status": "ok", "response": {}}], "heartbeat reply")
        psql("INSERT INTO student (first_name, last_name) VALUES ('Unix', 'Socket')")
        change = json.loads(await asyncio.wait_for(socket.recv(), 10))
        check(change[:4] == [None, None, "realtime:unix", "postgres_changes"], "a change frame", change)
        check(change[4]["ids"] == [binding_id], "tagged with the binding id", change)
        check(change[4]["data"]["record"]["first_name"] == "Unix", "the row", change)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--dsn", required=True)
    arguments = parser.parse_args()
    checks.DSN = arguments.dsn
    await over_unix_socket(arguments.socket, arguments.key)
    await over_tcp(arguments.port, arguments.key)
    print("OK", flush=True)


asyncio.run(main())
