"""Writes NKey and JWT (decentralised) authentication for a test nats-server.

    make_auth.py DIRECTORY

Made with the `nkeys` package, independently of pgherald's own NKey code:
  user.nk       a user's NKey seed that nkey.conf lets in
  stranger.nk   a user's NKey seed that no configuration knows
  nkey.conf     nats-server configuration: one NKey user
  user.creds    a user JWT issued by an account, and the user's seed
  operator.conf nats-server configuration in operator mode: an operator,
                an account with JetStream, resolved from memory
"""
import base64
import hashlib
import json
import os
import sys
import time

import nkeys


def new_key(prefix):
    return nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix))


def encode(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(issuer, subject, name, nats):
    body = {"iat": int(time.time()), "iss": issuer.public_key.decode(), "name": name,
            "sub": subject.public_key.decode(), "nats": nats}
    # The JWT id is the base32 SHA-512/256 of the claims without it, as nats-io/jwt computes it.
    body["jti"] = base64.b32encode(hashlib.new("sha512_256", json.dumps(body).encode()).digest()).decode().rstrip("=")
    header = encode(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = encode(json.dumps(body).encode())
    signature = issuer.sign(f"{header}.{payload}".encode())
    return f"{header}.{payload}.{encode(signature)}"


def main(directory):
    user = new_key(nkeys.PREFIX_BYTE_USER)
    stranger = new_key(nkeys.PREFIX_BYTE_USER)
    with open(os.path.join(directory, "user.nk"), "w") as out:
        out.write(user.seed.decode() + "\n")
    with open(os.path.join(directory, "stranger.nk"), "w") as out:
        out.write(stranger.seed.decode() + "\n")
    with open(os.path.join(directory, "nkey.conf"), "w") as out:
        out.write('authorization { users = [ { nkey: "%s" } ] }\n' % user.public_key.decode())

    operator = new_key(nkeys.PREFIX_BYTE_OPERATOR)
    account = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    system = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
    member = new_key(nkeys.PREFIX_BYTE_USER)
    unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                 "conn": -1, "leaf": -1}
    operator_jwt = jwt(operator, operator, "pgherald-test", {"type": "operator", "version": 2})
    account_jwt = jwt(operator, account, "APP", {
        "limits": dict(unlimited, mem_storage=-1, disk_storage=-1, streams=-1, consumer=-1),
        "default_permissions": {"pub": {}, "sub": {}}, "type": "account", "version": 2})
    system_jwt = jwt(operator, system, "SYS", {
        "limits": unlimited, "default_permissions": {"pub": {}, "sub": {}}, "type": "account", "version": 2})
    user_jwt = jwt(account, member, "pgherald", {
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2})
    with open(os.path.join(directory, "user.creds"), "w") as out:
        out.write(f"""-----BEGIN NATS USER JWT-----
{user_jwt}
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.
NKEYs are sensitive and should be treated as secrets.

-----BEGIN USER NKEY SEED-----
{member.seed.decode()}
------END USER NKEY SEED------

*************************************************************
""")
    with open(os.path.join(directory, "operator.conf"), "w") as out:
        out.write(f"""operator: "{operator_jwt}"
system_account: "{system.public_key.decode()}"
resolver: MEMORY
resolver_preload: {{
  "{account.public_key.decode()}": "{account_jwt}"
  "{system.public_key.decode()}": "{system_jwt}"
}}
""")


main(sys.argv[1])
