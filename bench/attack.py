#!/usr/bin/env python3
"""One realtime key's attacks on pgherald's Unix socket at the fair-share
limits, for scenario w. of scripts/bench; every socket is the daemon's Unix
socket, every attack bounded in count and time.

  bench/attack.py --socket PATH --key KEY --connections N --channels N
                  [--table bench_attack] [--like-streams 20] [--broadcast-bytes 60000]
                  [--broadcasts-per-second 100] [--presence-bytes 30000] [--seconds 120]

Opens WebSocket connections with the key until N + 5 have been tried (those
past realtime.max_connections_per_key get 429), and joins N + 10 channels
over them (those past max_channels_per_key are refused), each a
postgres_changes INSERT binding on TABLE filtered by a like pattern of `%`,
280 `_` and `Z`. One connection joins a topic and then never reads, one
broadcasts near max_bytes to it at the given rate, and one tracks presence
there with a large meta ten times a second. Besides, --like-streams
`/events?table=TABLE` streams of 25 such patterns each. Every other socket is
read and thrown away. Prints `ready` once all is open, then attacks until
standard input closes or --seconds pass, and prints one JSON object of what
it did and what the daemon refused.
"""
import argparse, base64, json, os, select, socket, sys, threading, time

PATTERN = "%" + "_" * 280 + "Z"


def masked_frame(text):
    """A client's text frame, masked as RFC 6455 requires."""
    data = text.encode()
    key = os.urandom(4)
    head = bytes([0x81])
    if len(data) < 126:
        head += bytes([0x80 | len(data)])
    elif len(data) < 65536:
        head += bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + len(data).to_bytes(8, "big")
    body = bytearray(data)
    for index in range(len(body)):
        body[index] ^= key[index % 4]
    return head + key + bytes(body)


def open_http(path, request):
    """Sends a request on the socket; returns the socket, the status and what came after the head."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    sock.sendall(request.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            sock.close()
            return None, 0, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    return sock, status, rest


class Connection:
    """One WebSocket connection; reads its server's frames while it is set up."""

    def __init__(self, path, key):
        nonce = base64.b64encode(os.urandom(16)).decode()
        self.sock, self.status, self.buffer = open_http(path, (
            f"GET /realtime/v1/websocket?vsn=1.0.0&apikey={key} HTTP/1.1\r\nHost: localhost\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\n\r\n"))
        if self.sock is not None and self.status != 101:
            self.sock.close()
            self.sock = None
        self.ref = 0
        # Once the attack runs, frames wait here until the socket takes them,
        # so that a daemon that stops reading while it cannot write never
        # holds this process in a send.
        self.outbox = None

    def send(self, topic, event, payload, join_ref=None):
        self.ref += 1
        message = {"topic": topic, "event": event, "payload": payload, "ref": str(self.ref)}
        if join_ref is not None:
            message["join_ref"] = join_ref
        frame = masked_frame(json.dumps(message, separators=(",", ":")))
        if self.outbox is None:
            self.sock.sendall(frame)
        else:
            self.outbox += frame
        return str(self.ref)

    def flush(self):
        """Sends what the socket takes now of the waiting frames."""
        try:
            sent = self.sock.send(self.outbox)
        except BlockingIOError:
            return
        del self.outbox[:sent]

    def messages(self):
        """The text frames already read whole, decoded."""
        out = []
        while len(self.buffer) >= 2:
            length, start = self.buffer[1] & 0x7F, 2
            if length == 126:
                if len(self.buffer) < 4:
                    break
                length, start = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                if len(self.buffer) < 10:
                    break
                length, start = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < start + length:
                break
            opcode, payload = self.buffer[0] & 0x0F, self.buffer[start:start + length]
            self.buffer = self.buffer[start + length:]
            if opcode == 1:
                try:
                    out.append(json.loads(payload))
                except ValueError:
                    pass
        return out

    def await_reply(self, ref, seconds=10):
        """Reads until the reply to ref; returns it and whatever else came, or None on a timeout."""
        deadline, seen = time.monotonic() + seconds, []
        while time.monotonic() < deadline:
            for message in self.messages():
                seen.append(message)
                if message.get("event") == "phx_reply" and message.get("ref") == ref:
                    return message, seen
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                break
            if not chunk:
                break
            self.buffer += chunk
        return None, seen


def refused_join(reply, seen):
    """Whether a join was refused: an error reply, or a system message with status error after it."""
    if reply is None or reply.get("payload", {}).get("status") != "ok":
        return True
    return any(m.get("event") == "system" and m.get("payload", {}).get("status") != "ok" for m in seen)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--connections", type=int, required=True, help="realtime.max_connections_per_key")
    parser.add_argument("--channels", type=int, required=True, help="realtime.max_channels_per_key")
    parser.add_argument("--table", default="bench_attack")
    parser.add_argument("--like-streams", type=int, default=20)
    parser.add_argument("--broadcast-bytes", type=int, default=60000)
    parser.add_argument("--broadcasts-per-second", type=float, default=100)
    parser.add_argument("--presence-bytes", type=int, default=30000)
    parser.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args()
    started = time.monotonic()
    deadline = started + args.seconds
    figures = dict(connections=0, connectionsRefused=0, channels=0, channelsRefused=0, likeStreams=0, likeStreamLines=0,
                   broadcasts=0, broadcastBytes=0, broadcastsRefused=0, broadcastsHeldBack=0, presenceTracks=0, bytesRead=0, closedByDaemon=0)

    # The key's connections, five more tried than its limit allows.
    held = []
    for _ in range(args.connections + 5):
        connection = Connection(args.socket, args.key)
        if connection.sock is None:
            figures["connectionsRefused"] += 1
        else:
            held.append(connection)
    figures["connections"] = len(held)
    if len(held) < 4:
        sys.exit(f"attack: only {len(held)} connections opened with the key")

    # The room: one member that never reads, one sender, one presence tracker.
    room = "realtime:attack-room"
    silent, sender, tracker = held[0], held[1], held[2]
    for connection, presence_key in ((silent, ""), (sender, ""), (tracker, "attacker")):
        config = {"broadcast": {"ack": False, "self": False}, "presence": {"key": presence_key, "enabled": bool(presence_key)},
                  "private": False, "postgres_changes": []}
        ref = connection.send(room, "phx_join", {"config": config}, join_ref="1")
        reply, seen = connection.await_reply(ref)
        if refused_join(reply, seen):
            sys.exit(f"attack: the room's join was refused: {reply} {seen[-3:]}")

    # like-filter channels over the other connections, ten more joins than the key's limit.
    others = held[3:]
    joins = args.channels + 10 - 3
    # Each channel's system message says whether it was subscribed or refused.
    refused, settled = set(), set()

    def settle(messages):
        for message in messages:
            payload = message.get("payload") or {}
            # The channel a system message is about, by its payload's name where it has one.
            topic = "realtime:" + payload["channel"] if isinstance(payload.get("channel"), str) else message.get("topic") or ""
            if message.get("event") == "system" and topic.startswith("realtime:like-"):
                settled.add(topic)
                if payload.get("status") != "ok":
                    refused.add(topic)

    for index in range(joins):
        connection = others[index % len(others)]
        binding = {"event": "INSERT", "schema": "public", "table": args.table, "filter": "payload=like." + PATTERN}
        config = {"broadcast": {"ack": False, "self": False}, "presence": {"key": "", "enabled": False},
                  "private": False, "postgres_changes": [binding]}
        topic = f"realtime:like-{index}"
        ref = connection.send(topic, "phx_join", {"config": config}, join_ref=str(index))
        reply, seen = connection.await_reply(ref, seconds=2)
        if reply is None or reply.get("payload", {}).get("status") != "ok":
            refused.add(topic)
            settled.add(topic)
        settle(seen)
    wait_until = time.monotonic() + 10
    while len(settled) < joins and time.monotonic() < wait_until:
        for connection in others:
            settle(connection.await_reply("never", seconds=0.05)[1])
    figures["channelsRefused"] = len(refused)
    figures["channels"] = 3 + joins - len(refused)

    # /events streams of the same table, 25 like patterns each.
    where = "&".join(["where=payload.like." + PATTERN.replace("%", "%25")] * 25)
    streams = []
    for _ in range(args.like_streams):
        stream, status, rest = open_http(args.socket, f"GET /events?table={args.table}&format=ndjson&{where} HTTP/1.1\r\nHost: localhost\r\n\r\n")
        if stream is None or status != 200:
            sys.exit(f"attack: a like stream got {status}")
        figures["likeStreamLines"] += rest.count(b"\n")
        streams.append(stream)
    figures["likeStreams"] = len(streams)

    # Every socket but the silent member's is read and thrown away from here
    # on, when select says it has something: sends stay blocking, whole frames.
    readers = {c.sock: "ws" for c in held if c is not silent}
    readers.update({s: "stream" for s in streams})
    for connection in held:
        if connection is not silent:
            connection.sock.setblocking(False)
            connection.outbox = bytearray()
    for stream in streams:
        stream.setblocking(False)
    print("ready", flush=True)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    blob = "x" * max(0, args.broadcast_bytes - 200)
    interval = 1 / args.broadcasts_per_second
    next_broadcast = next_track = next_heartbeat = time.monotonic()
    while not stop.is_set() and time.monotonic() < deadline:
        now = time.monotonic()
        # A sender whose frames the daemon has not taken yet sends no more: it skips ahead.
        while next_broadcast <= now:
            if len(sender.outbox) > 1 << 20:
                figures["broadcastsHeldBack"] += 1
            else:
                frame = {"type": "broadcast", "event": "flood", "payload": {"n": figures["broadcasts"], "blob": blob}}
                sender.send(room, "broadcast", frame, join_ref="1")
                figures["broadcasts"] += 1
                figures["broadcastBytes"] += len(blob) + 200
            next_broadcast += interval
        if next_track <= now and len(tracker.outbox) <= 1 << 20:
            tracker.send(room, "presence", {"type": "presence", "event": "track",
                                            "payload": {"n": figures["presenceTracks"], "blob": "y" * args.presence_bytes}}, join_ref="1")
            figures["presenceTracks"] += 1
            next_track = now + 0.1
        if next_heartbeat <= now:
            for connection in held:
                if connection is not silent:
                    connection.send("phoenix", "heartbeat", {})
            next_heartbeat = now + 20
        waiting = {c.sock: c for c in held if c.outbox}
        readable, writable, _ = select.select(list(readers), list(waiting), [], 0.005)
        for sock in writable:
            try:
                waiting[sock].flush()
            except OSError as error:
                sys.exit(f"attack: a send failed: {error!r}")
        for sock in readable:
            try:
                chunk = sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                figures["closedByDaemon"] += 1
                readers.pop(sock)
                continue
            figures["bytesRead"] += len(chunk)
            if readers[sock] == "stream":
                figures["likeStreamLines"] += chunk.count(b"\n")
            elif sock is sender.sock:
                figures["broadcastsRefused"] += chunk.count(b"rate limited") + chunk.count(b"max_bytes")
    figures["seconds"] = round(time.monotonic() - started, 1)
    for sock in [c.sock for c in held] + streams:
        sock.close()
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
