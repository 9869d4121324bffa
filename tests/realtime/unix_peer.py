"""A Supabase Realtime client on pgherald's Unix socket, with Python's
standard library only, so it runs as any user (under setpriv) with the
system's python3. Without realtime keys configured, the daemon admits the
peer by its uid and the access section's grant.

Joins `*` on schema public, prints JOINED, waits for a line on stdin (the
test writes rows meanwhile), then prints each change it received within
two seconds as `TABLE`, and the join's system status as `SYSTEM STATUS`.

With `watch` after the socket path, it prints each message as it comes
instead, `CLOSE` for `phx_close`, for up to 30 seconds or until the channel
is closed.
"""

import base64
import json
import os
import socket
import struct
import sys
import time


def frame(text):
    payload = text.encode()
    mask = os.urandom(4)
    header = bytes([0x81])
    if len(payload) < 126:
        header += bytes([0x80 | len(payload)])
    else:
        header += bytes([0x80 | 126]) + struct.pack("!H", len(payload))
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_exact(connection, count):
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise EOFError("the daemon closed the socket")
        data += chunk
    return data


def read_message(connection):
    first, second = read_exact(connection, 2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", read_exact(connection, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", read_exact(connection, 8))[0]
    data = read_exact(connection, length)
    return first & 0x0F, data


def main():
    path = sys.argv[1]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    key = base64.b64encode(os.urandom(16)).decode()
    connection.sendall(
        (
            "GET /realtime/v1/websocket?vsn=1.0.0&apikey=anything HTTP/1.1\r\nHost: localhost\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += read_exact(connection, 1)
    status = head.split(b"\r\n")[0].decode()
    if " 101 " not in status:
        print("REFUSED", status, flush=True)
        return
    join = {"config": {"postgres_changes": [{"event": "*", "schema": "public"}]}}
    connection.sendall(frame(json.dumps({"topic": "realtime:peer", "event": "phx_join", "payload": join, "ref": "1", "join_ref": "1"})))
    print("JOINED", flush=True)
    watching = sys.argv[2:] == ["watch"]
    if not watching:
        sys.stdin.readline()
    connection.settimeout(0.2)
    deadline = time.monotonic() + (30 if watching else 2)
    while time.monotonic() < deadline:
        try:
            opcode, data = read_message(connection)
        except socket.timeout:
            continue
        if opcode != 1:
            continue
        message = json.loads(data)
        if message["event"] == "system":
            reason = [message["payload"].get("message", "")] if watching else []
            print("SYSTEM", message["payload"]["status"], *reason, flush=True)
        elif message["event"] == "phx_close":
            print("CLOSE", flush=True)
            return
        elif message["event"] == "postgres_changes":
            print(message["payload"]["data"]["table"], flush=True)


main()
