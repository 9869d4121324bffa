"""Broadcast and presence between Supabase's Python realtime clients spread
over three pgherald daemons of one cluster.

Run by the Swift integration test ClusterTests with the daemons' ports, a key
all three accept, and the pid of the third daemon, which this script kills
with SIGKILL to time how long its clients' presence takes to leave the
others. Exits non-zero with the reason on the first check that fails, and
prints OK at the end.
"""

import argparse
import asyncio
import os
import signal
import time

from realtime import AsyncRealtimeClient

from checks import check, subscribed, wait_for


def options(key=""):
    return {"config": {"broadcast": {"self": False, "ack": False}, "presence": {"key": key, "enabled": bool(key)}, "private": False}}


async def settle():
    """Long enough for a repeat to arrive, were one sent."""
    await asyncio.sleep(0.8)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ports", type=int, nargs=3, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--kill-pid", type=int, required=True, help="the daemon on the third port")
    parser.add_argument("--bound", type=float, required=True, help="seconds within which a killed daemon's presence must leave")
    args = parser.parse_args()

    names = ["alice", "bob", "carol"]
    clients = [AsyncRealtimeClient(f"ws://127.0.0.1:{port}/realtime/v1", args.key) for port in args.ports]
    for client in clients:
        await client.connect()

    # Broadcast: one client's message reaches the topic's members on every daemon, once each.
    inboxes = {name: [] for name in names}
    lobby = {}
    for name, client in zip(names, clients):
        lobby[name] = client.channel("lobby", options()).on_broadcast("hello", inboxes[name].append)
        await subscribed(lobby[name])
    await lobby["alice"].send_broadcast("hello", {"from": "alice"})
    await wait_for(inboxes["bob"], 1, "alice's broadcast at bob (another daemon)")
    await wait_for(inboxes["carol"], 1, "alice's broadcast at carol (a third daemon)")
    await lobby["carol"].http_send("hello", {"from": "carol over REST"})
    await wait_for(inboxes["alice"], 1, "carol's REST broadcast at alice")
    await wait_for(inboxes["bob"], 2, "carol's REST broadcast at bob")
    await settle()
    payloads = {name: sorted(m["payload"]["from"] for m in inbox) for name, inbox in inboxes.items()}
    check(payloads == {
        "alice": ["carol over REST"],
        "bob": ["alice", "carol over REST"],
        "carol": ["alice", "carol over REST"],
    }, "each broadcast reaches each member once, and self: false keeps alice's own from her", payloads)

    # Presence: the union of every daemon's, as it changes.
    office = {}
    for name, client in zip(names, clients):
        office[name] = client.channel("office", options(key=name))
        office[name].on_presence_sync(lambda: None)
        await subscribed(office[name])
        await office[name].track({"name": name})

    async def everyone_sees(keys, what):
        for _ in range(200):
            if all(sorted(office[name].presence_state()) == keys for name in names if name in office):
                return
            await asyncio.sleep(0.05)
        check(False, what, {name: sorted(office[name].presence_state()) for name in office})

    await everyone_sees(names, "every client sees all three, on three daemons")
    await office["bob"].untrack()
    await everyone_sees(["alice", "carol"], "bob's untrack leaves everywhere")
    await office["bob"].track({"name": "bob", "again": True})
    await everyone_sees(names, "bob's second track joins everywhere")
    state = office["alice"].presence_state()
    check(state["bob"][0].get("again") is True, "alice sees bob's new meta", state)

    # The third daemon dies: carol leaves everyone else's presence within the bound.
    os.kill(args.kill_pid, signal.SIGKILL)
    killed = time.monotonic()
    del office["carol"]
    await everyone_sees(["alice", "bob"], f"carol leaves within {args.bound} s of her daemon's death")
    elapsed = time.monotonic() - killed
    check(elapsed <= args.bound, f"carol left after {elapsed:.1f} s, more than {args.bound} s")
    print(f"carol's presence left the others {elapsed:.1f} s after her daemon was killed", flush=True)

    # The survivors still broadcast to each other.
    await lobby["bob"].send_broadcast("hello", {"from": "bob"})
    await wait_for(inboxes["alice"], 2, "bob's broadcast at alice after the kill")

    for client in clients[:2]:
        await client.close()
    print("OK", flush=True)


asyncio.run(main())
