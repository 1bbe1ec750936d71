"""``vdsp keys init|add|allow|revoke|list``: the CURVE keys of the SoC's tcp endpoints (the server
pair, and the client and admin keys allowed to connect; vdsp_board/identity/curve.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol import errors
from vdsp_board.identity.curve import ADMIN, CLIENT, create, init, keys_dir, load_public


def add_parser(sub) -> argparse.ArgumentParser:
    ap = sub.add_parser("keys", help="CURVE keys for tcp endpoints: init, add, allow, revoke, list",
                        description="CURVE keys of the SoC's tcp endpoints: the server pair, and the client "
                                    "and admin keys allowed to connect.")
    ap.add_argument("--dir", type=Path, help="key directory (default $VDSP_KEYS_DIR, else <runtime dir>/keys)")
    ksub = ap.add_subparsers(dest="action", required=True)
    ksub.add_parser("init", help="make the server pair and the relay, admin and client pairs (kept if present)")
    add = ksub.add_parser("add", help="make a client key pair and allow it")
    add.add_argument("name", help="key name (file NAME.key / NAME.key_secret)")
    add.add_argument("--admin", action="store_true", help="may also write remoteproc attributes over tcp")
    allow = ksub.add_parser("allow", help="allow a public key made elsewhere")
    allow.add_argument("public_file", type=Path, help="a NAME.key file")
    allow.add_argument("--admin", action="store_true", help="may also write remoteproc attributes over tcp")
    revoke = ksub.add_parser("revoke", help="remove NAME from the allow-lists")
    revoke.add_argument("name", help="the key name to remove ('vdsp keys list' lists them)")
    ksub.add_parser("list", help="the allowed keys and their roles")
    return ap


def run(args: argparse.Namespace) -> int:
    directory = args.dir or keys_dir()
    try:
        if args.action == "init":
            for path in init(directory):
                print(f"made {path}")
            print(f"keys in {directory}: give clients server.key and a client key pair "
                  f"(VDSP_SERVER_KEY, VDSP_CLIENT_KEY)")
        elif args.action == "add":
            public, secret = create(directory, args.name, role=ADMIN if args.admin else CLIENT)
            print(f"made {secret} (allowed as {'admin' if args.admin else 'client'}); its public key: {public}")
        elif args.action == "allow":
            role = ADMIN if args.admin else CLIENT
            load_public(args.public_file)
            (directory / role).mkdir(mode=0o700, parents=True, exist_ok=True)
            target = directory / role / args.public_file.name
            target.write_bytes(args.public_file.read_bytes())
            print(f"allowed {target}")
        elif args.action == "revoke":
            gone = [p for role in (ADMIN, CLIENT) for p in [directory / role / f"{args.name}.key"] if p.exists()]
            for path in gone:
                path.unlink()
                print(f"revoked {path}")
            if not gone:
                print(f"vdsp keys: no allowed key named {args.name!r}", file=sys.stderr)
                return 1
        else:
            for role in (ADMIN, CLIENT):
                for path in sorted((directory / role).glob("*.key")) if (directory / role).is_dir() else []:
                    print(f"{role[:-1]:6} {path.stem:20} {load_public(path).decode()}")
    except errors.VdspError as exc:
        print(f"vdsp keys: {exc}", file=sys.stderr)
        return 1
    return 0
