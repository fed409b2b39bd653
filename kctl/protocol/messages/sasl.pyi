# Generated from kctl/protocol/messages/sasl.py by scripts/gen_protocol_stubs.py.
# Do not edit: run `make gen`.

from dataclasses import dataclass
from typing import ClassVar

from kctl.protocol.schema import ApiSchema
from kctl.protocol.types import StructSchema

@dataclass(slots=True)
class SaslHandshakeRequest:
    __kafka_schema__: ClassVar[StructSchema]
    mechanism: str = ...
    def __kctl_response__(self) -> SaslHandshakeResponse: ...

@dataclass(slots=True)
class SaslHandshakeResponse:
    __kafka_schema__: ClassVar[StructSchema]
    error_code: int = ...
    mechanisms: list[str] = ...

@dataclass(slots=True)
class SaslAuthenticateRequest:
    __kafka_schema__: ClassVar[StructSchema]
    auth_bytes: bytes = ...
    def __kctl_response__(self) -> SaslAuthenticateResponse: ...

@dataclass(slots=True)
class SaslAuthenticateResponse:
    __kafka_schema__: ClassVar[StructSchema]
    error_code: int = ...
    error_message: str | None = ...
    auth_bytes: bytes = ...
    session_lifetime_ms: int = ...

SASL_HANDSHAKE: ApiSchema
SASL_AUTHENTICATE: ApiSchema
