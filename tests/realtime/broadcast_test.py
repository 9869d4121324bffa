"""Broadcast and presence between Supabase's Python realtime clients through
pgherald, and broadcasts sent from the database with pgherald.send.

Run by the Swift integration test SupabaseClientTests against a daemon with
three keys: --all-key (unrestricted), --courses-key (no topics) and
--rooms-key (granted the private topics room-*). Exits non-zero with the
reason on the first check that fails, and prints OK at the end.
"""

import argparse
import asyncio
import subprocess

from realtime import AsyncRealtimeClient

from checks import check, wait_for


async def subscribe(channel):
    """SUBSCRIBED, or the error the server gave."""
    outcome = asyncio.get_running_loop().create_future()

    def on_status(status, error):
        if not outcome.done() and (str(status).endswith("SUBSCRIBED") or error is not None):
            outcome.set_result("SUBSCRIBED" if error is None else str(error))

    await channel.subscribe(on_status)
    return await asyncio.wait_for(outcome, 10)


def options(self=False, ack=False, private=False, key=""):
    return {"config": {"broadcast": {"self": self, "ack": ack}, "presence": {"key": key, "enabled": False}, "private": private}}


async def from_the_database(client, dsn):
    """pgherald.send in a transaction: delivered on commit, never on rollback."""
    headlines = []
    news = client.channel("news", options()).on_broadcast("headline", headlines.append)
    check(await subscribe(news) == "SUBSCRIBED", "joins the news")
    for sql in [
        """BEGIN; SELECT pgherald.send('{"title": "rolled back"}', 'headline', 'news', false); ROLLBACK""",
        """BEGIN; SELECT pgherald.send('{"title": "committed"}', 'headline', 'news', false); COMMIT""",
    ]:
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql], check=True, capture_output=True)
    await wait_for(headlines, 1, "the database's broadcast")
    await asyncio.sleep(0.3)
    check([h["payload"] for h in headlines] == [{"title": "committed"}], "the committed message only", headlines)


async def presence(alice, bob, carol):
    """Each sees who tracks, on joining and as it changes, and a client that vanishes leaves."""
    joins, leaves = [], []
    watching = alice.channel("office", options(key="alice"))
    watching.on_presence_join(lambda key, current, new: joins.append(key))
    watching.on_presence_leave(lambda key, current, left: leaves.append(key))
    check(await subscribe(watching) == "SUBSCRIBED", "alice joins the office")
    await watching.track({"status": "at her desk"})
    await wait_for(joins, 1, "alice's own join")

    present = bob.channel("office", options(key="bob"))
    present.on_presence_sync(lambda: None)
    check(await subscribe(present) == "SUBSCRIBED", "bob joins the office")
    for _ in range(100):
        if "alice" in present.presence_state():
            break
        await asyncio.sleep(0.05)
    state = present.presence_state()
    check(list(state) == ["alice"] and state["alice"][0]["status"] == "at her desk", "bob's presence_state on joining has alice", state)
    await present.track({"status": "in a meeting"})
    await wait_for(joins, 2, "bob's join, seen by alice")
    check(joins == ["alice", "bob"], "alice sees bob arrive", joins)
    check(sorted(watching.presence_state()) == ["alice", "bob"], "alice's state has both", watching.presence_state())

    # Untracking leaves; tracking again joins.
    await present.untrack()
    await wait_for(leaves, 1, "bob's untrack")
    await present.track({"status": "back"})
    await wait_for(joins, 3, "bob's second track")

    # Bob's client vanishes without leaving: alice sees him go.
    await bob.close()
    await wait_for(leaves, 2, "bob vanishing")
    check(leaves == ["bob", "bob"] and sorted(watching.presence_state()) == ["alice"], "only alice is left", leaves, watching.presence_state())

    # A late joiner gets the state as it is now.
    late = carol.channel("office", options(key="carol"))
    late.on_presence_sync(lambda: None)
    check(await subscribe(late) == "SUBSCRIBED", "carol joins the office")
    for _ in range(100):
        if late.presence_state():
            break
        await asyncio.sleep(0.05)
    check(sorted(late.presence_state()) == ["alice"], "carol sees alice alone", late.presence_state())


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--all-key", required=True)
    parser.add_argument("--courses-key", required=True)
    parser.add_argument("--rooms-key", required=True)
    parser.add_argument("--dsn", required=True)
    args = parser.parse_args()
    url = f"ws://127.0.0.1:{args.port}/realtime/v1"

    alice = AsyncRealtimeClient(url, args.all_key)
    bob = AsyncRealtimeClient(url, args.courses_key)
    carol = AsyncRealtimeClient(url, args.rooms_key)
    for client in (alice, bob, carol):
        await client.connect()

    to_alice, to_bob = [], []
    quiet = alice.channel("lobby", options()).on_broadcast("hello", to_alice.append)
    echoing = bob.channel("lobby", options(self=True, ack=True)).on_broadcast("hello", to_bob.append)
    check(await subscribe(quiet) == "SUBSCRIBED", "alice joins the lobby")
    check(await subscribe(echoing) == "SUBSCRIBED", "bob joins the lobby")

    # self: false, so alice does not get her own.
    await quiet.send_broadcast("hello", {"from": "alice"})
    await wait_for(to_bob, 1, "broadcasts to bob")
    check(to_bob[0]["payload"] == {"from": "alice"} and to_bob[0]["event"] == "hello", "bob gets alice's message", to_bob)
    await asyncio.sleep(0.3)
    check(to_alice == [], "self: false keeps alice's own message from her", to_alice)

    # self: true, so bob gets his own as well as alice.
    await echoing.send_broadcast("hello", {"from": "bob"})
    await wait_for(to_alice, 1, "broadcasts to alice")
    await wait_for(to_bob, 2, "broadcasts to bob, his own included")
    check(to_alice[0]["payload"] == {"from": "bob"}, "alice gets bob's message", to_alice)

    # The REST endpoint reaches the topic's members too.
    await quiet.http_send("hello", {"from": "rest"})
    await wait_for(to_alice, 2, "the REST broadcast at alice")
    await wait_for(to_bob, 3, "the REST broadcast at bob")
    check(to_alice[1]["payload"] == {"from": "rest"}, "the REST broadcast's payload", to_alice)

    # A private topic needs a grant: bob's key has none, carol's has room-*.
    refused = await subscribe(bob.channel("room-1", options(private=True)))
    check("not granted the private topic" in refused, "bob may not join a private room", refused)
    to_carol = []
    private = carol.channel("room-1", options(private=True)).on_broadcast("note", to_carol.append)
    check(await subscribe(private) == "SUBSCRIBED", "carol joins the private room")
    # A public channel of the same name is another topic: its messages stay out of the private one.
    public = alice.channel("room-1", options())
    check(await subscribe(public) == "SUBSCRIBED", "alice joins the public room-1")
    await public.send_broadcast("note", {"from": "public"})
    await private.http_send("note", {"from": "carol over REST"})
    await wait_for(to_carol, 1, "the private broadcast")
    await asyncio.sleep(0.3)
    check([m["payload"] for m in to_carol] == [{"from": "carol over REST"}], "only private messages reach the private topic", to_carol)

    await from_the_database(alice, args.dsn)
    await presence(alice, bob, carol)

    for client in (alice, carol):
        await client.close()
    print("OK", flush=True)


asyncio.run(main())
