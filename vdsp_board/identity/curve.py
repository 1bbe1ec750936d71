"""Who may reach the SoC over tcp: ZeroMQ CURVE keys, an allow-list, and admin rights.

Every tcp endpoint of the SoC (the relay's front, each core's control endpoint, each
firmware's task endpoint) is a CURVE server. A peer must know the server's public key (the
SoC's; a firmware's own, which its core announces) and present a client key on the allow-list;
anything else fails the handshake and gets nothing at all, not even an error reply (the refusal is logged, at most once per
key per 10 s). ipc endpoints keep file-permission protection (a private runtime
directory, see ``vdsp_board.processes.rundir``) and need no keys.

The key directory (``VDSP_KEYS_DIR``, else ``<runtime dir>/keys``), made by
``vdsp keys init`` and ``vdsp keys add``::

    server.key, server.key_secret   the SoC's key pair (zmq.auth certificate files)
    clients/NAME.key                public keys allowed to submit tasks and read
    admins/NAME.key                 public keys also allowed to write remoteproc attributes
    NAME.key, NAME.key_secret       the key pairs made here, to hand to their users

A client picks its key pair with ``VDSP_CLIENT_KEY`` (the ``.key_secret`` file; default
``client.key_secret`` of the key directory) and learns the server key from
``VDSP_SERVER_KEY`` (default ``server.key`` of the key directory). The SoC's own
processes (the relay, talking to the cores) use ``relay.key_secret``, an admin key.

The ZAP handler names each authenticated peer ``admin:NAME`` or ``client:NAME``; servers
read that name from the ``User-Id`` property of the messages they receive.
"""
from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import zmq
import zmq.auth

from protocol import errors
from vdsp_board.config import settings
from vdsp_board.identity import admission
from vdsp_board.observability.log import RateLimited

log = logging.getLogger("vdsp.curve")
ADMIN, CLIENT = "admins", "clients"


def keys_dir(rt: Path | None = None) -> Path:
    env = settings.current().keys_dir
    if env:
        return env
    from vdsp_board.processes import rundir
    return (rt or rundir.runtime_dir()) / "keys"


def is_tcp(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


def _private_file(path: Path) -> None:
    """Refuse a secret key file that is a symlink, not ours, or readable by others."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise errors.FileNotFound(f"key file {path} does not exist (create keys with 'vdsp keys init')") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise errors.InvalidArgument(f"secret key file {path} must be a regular file of yours with mode 0600")


def load_pair(secret_file: Path) -> tuple[bytes, bytes]:
    """(public, secret) from a ``.key_secret`` certificate. Raises FileNotFound / InvalidArgument."""
    _private_file(secret_file)
    public, secret = zmq.auth.load_certificate(str(secret_file))
    if not secret:
        raise errors.InvalidArgument(f"{secret_file} holds no secret key")
    return public, secret


def load_public(public_file: Path) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(str(public_file))
    except (OSError, ValueError) as exc:
        raise errors.FileNotFound(f"cannot read public key {public_file}: {exc}") from exc
    return public


def create(directory: Path, name: str, *, role: str | None) -> tuple[Path, Path]:
    """Make the key pair ``name`` in ``directory`` and, for a role, allow its public key there.

    Returns (public file, secret file). Raises InvalidArgument for a bad name.
    """
    if not name or "/" in name or name.startswith(".") or len(name) > 64:
        raise errors.InvalidArgument(f"key name {name!r} must be 1..64 characters without '/' or a leading '.'")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    old = os.umask(0o077)
    try:
        public, secret = zmq.auth.create_certificates(str(directory), name)
        if role is not None:
            allowed = directory / role
            allowed.mkdir(mode=0o700, exist_ok=True)
            (allowed / f"{name}.key").write_bytes(Path(public).read_bytes())
    finally:
        os.umask(old)
    return Path(public), Path(secret)


def init(directory: Path) -> list[Path]:
    """The server pair, the relay's admin pair, an ``admin`` and a ``client`` pair (kept if present)."""
    made = []
    for name, role in (("server", None), ("relay", ADMIN), ("admin", ADMIN), ("client", CLIENT)):
        if not (directory / f"{name}.key_secret").exists():
            made.append(create(directory, name, role=role)[1])
    return made


class Gate:
    """The ZAP handler of one server process: CURVE keys on the allow-list pass, named by role."""

    def __init__(self, ctx: zmq.Context, directory: Path) -> None:
        self.directory = directory
        self.refusals = RateLimited(log)
        self.names: dict[bytes, str] = {}
        self.keys: dict[str, bytes] = {}     # the reverse: which key a name authenticated with
        self.auth = _authenticator(ctx, self)
        self.auth.start()
        self.auth.configure_curve_callback(domain="*", credentials_provider=self)

    def callback(self, domain: str, z85_key: bytes) -> bool:
        """Allowed? Reads the allow-list at every handshake, so keys added or removed take effect.
        The answer goes through ``admission.zap_verdict``: it waits while a server's admission
        closes connections still in their handshake, so that none it closes gets its READY."""
        name = self._lookup(z85_key)
        if name is None:
            self.refusals.warn(z85_key, "refused a tcp peer with CURVE key %s...: not on the allow-list of %s",
                               z85_key[:8].decode(errors="replace"), self.directory)
            return admission.zap_verdict(False)
        self.names[z85_key] = name
        self.keys[name] = z85_key
        return admission.zap_verdict(True)

    def key_of(self, name: str) -> str | None:
        """The Z85 public key the peer named ``name`` (``client:NAME``) authenticated with."""
        key = self.keys.get(name)
        return key.decode("ascii") if key is not None else None

    def _lookup(self, z85_key: bytes) -> str | None:
        for role, prefix in ((ADMIN, "admin"), (CLIENT, "client")):
            folder = self.directory / role
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.key")):
                try:
                    if load_public(path) == z85_key:
                        return f"{prefix}:{path.stem}"
                except errors.VdspError:
                    continue
        return None

    def stop(self) -> None:
        self.auth.stop()


def _authenticator(ctx: zmq.Context, gate: Gate):
    """The ZAP thread of ``gate``, naming each peer by the key it authenticated with. Its module
    (zmq.auth.thread) imports asyncio, with ssl ~0.1 s of CPU: imported here, by a server that
    runs a Gate, never by a client (each `vdsp` command) that only loads keys."""
    from zmq.auth.thread import ThreadAuthenticator

    class Authenticator(ThreadAuthenticator):
        def curve_user_id(self, client_public_key: bytes) -> str:
            return gate.names.get(zmq.utils.z85.encode(client_public_key), "client:?")
    return Authenticator(ctx, log=logging.getLogger("vdsp.curve.zap"))


def secure_server(sock: zmq.Socket, endpoint: str, directory: Path | None = None) -> bool:
    """Make ``sock`` a CURVE server if ``endpoint`` is tcp (before bind). True if it did.

    The caller must run a :class:`Gate` on the socket's context. Raises FileNotFound /
    InvalidArgument when the server key is missing or unsafe.
    """
    if not is_tcp(endpoint):
        return False
    _, secret = load_pair((directory or keys_dir()) / "server.key_secret")
    sock.curve_secretkey = secret
    sock.curve_server = True
    return True


def own_server(sock: zmq.Socket, endpoint: str) -> str:
    """Make ``sock`` a CURVE server with a key pair of its own, made now, if ``endpoint`` is tcp
    (before bind): a firmware's (it holds no key of the SoC's; its core announces the public
    key). Returns that public key (Z85), or '' on ipc. The caller must run a :class:`Gate`."""
    if not is_tcp(endpoint):
        return ""
    public, secret = zmq.curve_keypair()
    sock.curve_secretkey = secret
    sock.curve_server = True
    return public.decode("ascii")


def secure_client(sock: zmq.Socket, endpoint: str, *, key_file: Path | None = None,
                  server_key: str | None = None) -> bool:
    """Give ``sock`` our CURVE key pair and the server's key if ``endpoint`` is tcp (before connect).
    ``server_key``: the server's public key (Z85) when it is not the SoC's (a firmware's, as its
    core announced it); else ``VDSP_SERVER_KEY`` or the key directory's ``server.key``.

    Raises FileNotFound / InvalidArgument when a key is missing or unsafe.
    """
    if not is_tcp(endpoint):
        return False
    public, secret = load_pair(key_file or client_key_file())
    if server_key:
        if len(server_key) != 40:
            raise errors.InvalidArgument(f"server key {server_key[:50]!r} is not a Z85 CURVE key (40 characters)")
        sock.curve_serverkey = server_key.encode("ascii")
    else:
        sock.curve_serverkey = load_public(settings.current().server_key or keys_dir() / "server.key")
    sock.curve_publickey, sock.curve_secretkey = public, secret
    return True


def client_key_file() -> Path:
    """This client's ``.key_secret`` file: ``VDSP_CLIENT_KEY``, else the key directory's ``client.key_secret``."""
    return settings.current().client_key or keys_dir() / "client.key_secret"


def client_public_key() -> str:
    """This client's CURVE public key (Z85), the one it connects with. Raises FileNotFound / InvalidArgument."""
    return load_pair(client_key_file())[0].decode("ascii")


def peer_name(frame: zmq.Frame) -> str:
    """The ZAP name (``admin:NAME`` / ``client:NAME``) of the peer that sent ``frame``, or ``""``."""
    try:
        return str(frame.get("User-Id") or "")
    except zmq.ZMQError:
        return ""


def is_admin(name: str) -> bool:
    return name.startswith("admin:")
