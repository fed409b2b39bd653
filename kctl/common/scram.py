"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: SCRAM-SHA-256 and SCRAM-SHA-512, the stored
credential (salt, StoredKey, ServerKey, iterations; never the password) in Kafka's text form
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``, and both sides of the exchange:
``ScramClient`` (kctl's client) and ``ScramServer`` (the broker). Proofs are compared in constant time.

Shared by the client and the broker, hence in kctl.common (no I/O: messages in, messages out)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

#: mechanism name -> hashlib name
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's wire code of each mechanism (AlterUserScramCredentials, DescribeUserScramCredentials)
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """A malformed SCRAM message, an unknown mechanism, or a failed proof."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as error:
        raise ScramError(f"bad base64: {error}") from None


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism.upper()]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(digest: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, digest).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2-HMAC with the mechanism's hash (password as UTF-8, as Kafka)."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What a server keeps of a SCRAM password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salted: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        digest = _hash(mechanism)
        client_key = _hmac(digest, salted, b"Client Key")
        return cls(
            salt=salt,
            stored_key=hashlib.new(digest, client_key).digest(),
            server_key=_hmac(digest, salted, b"Server Key"),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        salt = salt if salt is not None else os.urandom(32)
        return cls.from_salted_password(
            mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
        )

    def to_text(self) -> str:
        """Kafka's stored form (the value under ``/config/users/<user>``)."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                salt=_unb64(fields["salt"]),
                stored_key=_unb64(fields["stored_key"]),
                server_key=_unb64(fields["server_key"]),
                iterations=int(fields["iterations"]),
            )
        except (KeyError, ValueError) as error:
            raise ScramError(f"malformed SCRAM credential: {error}") from None


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        out[part[0]] = part[2:]
    return out


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_name(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramClient:
    """The client's side: ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        self.mechanism = mechanism.upper()
        self._digest = _hash(mechanism)
        self.username = username
        self._password = password
        self._nonce = nonce or _b64(os.urandom(24)).rstrip("=")
        self._first_bare = f"n={_escape_name(username)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = _attributes(text)
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), _unb64(attrs.get("s", "")), int(attrs.get("i", "0"))
        if not nonce.startswith(self._nonce) or iterations < 1:
            raise ScramError("invalid server-first message")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._digest, salted, b"Client Key")
        stored_key = hashlib.new(self._digest, client_key).digest()
        proof = _xor(client_key, _hmac(self._digest, stored_key, self._auth_message))
        self._server_key = _hmac(self._digest, salted, b"Server Key")
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        expected = _hmac(self._digest, self._server_key, self._auth_message)
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), expected):
            raise ScramError("the server's signature does not match")


class ScramServer:
    """The server's side of one exchange. ``first(client_first)`` returns the user name and waits for
    ``set_credential``; ``server_first()``, then ``final(client_final)`` checks the proof (constant
    time) and returns the server-final message. Any failure raises ScramError."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism.upper()
        self._digest = _hash(mechanism)
        self.username = ""
        self._client_first_bare = ""
        self._client_nonce = ""
        self._nonce = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    def first(self, client_first: bytes) -> str:
        try:
            text = client_first.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("client-first message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("malformed client-first message (channel binding is not supported)")
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("client-first message without user name or nonce")
        self.username = _unescape_name(attrs["n"])
        self._client_nonce = attrs["r"]
        return self.username

    def server_first(self, credential: ScramCredential | None) -> bytes:
        """With ``credential`` None (unknown user) a fake salt is used, so the exchange fails only
        at the proof, as it would for a wrong password."""
        self._credential = credential
        salt = credential.salt if credential is not None else hashlib.sha256(self.username.encode()).digest()
        iterations = credential.iterations if credential is not None else DEFAULT_ITERATIONS
        self._nonce = self._client_nonce + _b64(os.urandom(24)).rstrip("=")
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        text = client_final.decode("utf-8", "replace")
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message without proof")
        attrs = _attributes(without_proof)
        # endswith, as Kafka's ScramSaslServer: librdkafka before 2.1 repeats its own nonce in front
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("nonce mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        proof = _unb64(proof_part)
        if credential is None:
            raise ScramError("authentication failed")
        signature = _hmac(self._digest, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("authentication failed")
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise ScramError("authentication failed")
        return f"v={_b64(_hmac(self._digest, credential.server_key, auth_message))}".encode()
