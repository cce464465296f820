from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IdentifierKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IDENTIFIER_KIND_UNSPECIFIED: _ClassVar[IdentifierKind]
    IDENTIFIER_KIND_ETHEREUM: _ClassVar[IdentifierKind]
    IDENTIFIER_KIND_PASSKEY: _ClassVar[IdentifierKind]
IDENTIFIER_KIND_UNSPECIFIED: IdentifierKind
IDENTIFIER_KIND_ETHEREUM: IdentifierKind
IDENTIFIER_KIND_PASSKEY: IdentifierKind

class Passkey(_message.Message):
    __slots__ = ("key", "relying_party")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RELYING_PARTY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    relying_party: str
    def __init__(self, key: _Optional[bytes] = ..., relying_party: _Optional[str] = ...) -> None: ...

class MemberIdentifier(_message.Message):
    __slots__ = ("ethereum_address", "installation_public_key", "passkey")
    ETHEREUM_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    INSTALLATION_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    PASSKEY_FIELD_NUMBER: _ClassVar[int]
    ethereum_address: str
    installation_public_key: bytes
    passkey: Passkey
    def __init__(self, ethereum_address: _Optional[str] = ..., installation_public_key: _Optional[bytes] = ..., passkey: _Optional[_Union[Passkey, _Mapping]] = ...) -> None: ...

class CreateInbox(_message.Message):
    __slots__ = ("initial_identifier", "nonce", "initial_identifier_signature", "initial_identifier_kind", "relying_party")
    INITIAL_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_IDENTIFIER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_IDENTIFIER_KIND_FIELD_NUMBER: _ClassVar[int]
    RELYING_PARTY_FIELD_NUMBER: _ClassVar[int]
    initial_identifier: str
    nonce: int
    initial_identifier_signature: bytes
    initial_identifier_kind: IdentifierKind
    relying_party: str
    def __init__(self, initial_identifier: _Optional[str] = ..., nonce: _Optional[int] = ..., initial_identifier_signature: _Optional[bytes] = ..., initial_identifier_kind: _Optional[_Union[IdentifierKind, str]] = ..., relying_party: _Optional[str] = ...) -> None: ...

class AddAssociation(_message.Message):
    __slots__ = ("new_member_identifier", "existing_member_signature", "new_member_signature", "relying_party")
    NEW_MEMBER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    EXISTING_MEMBER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    NEW_MEMBER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    RELYING_PARTY_FIELD_NUMBER: _ClassVar[int]
    new_member_identifier: MemberIdentifier
    existing_member_signature: bytes
    new_member_signature: bytes
    relying_party: str
    def __init__(self, new_member_identifier: _Optional[_Union[MemberIdentifier, _Mapping]] = ..., existing_member_signature: _Optional[bytes] = ..., new_member_signature: _Optional[bytes] = ..., relying_party: _Optional[str] = ...) -> None: ...

class RevokeAssociation(_message.Message):
    __slots__ = ("member_to_revoke", "recovery_identifier_signature")
    MEMBER_TO_REVOKE_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_IDENTIFIER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    member_to_revoke: MemberIdentifier
    recovery_identifier_signature: bytes
    def __init__(self, member_to_revoke: _Optional[_Union[MemberIdentifier, _Mapping]] = ..., recovery_identifier_signature: _Optional[bytes] = ...) -> None: ...

class ChangeRecoveryAddress(_message.Message):
    __slots__ = ("new_recovery_identifier", "existing_recovery_identifier_signature", "new_recovery_identifier_kind", "relying_party")
    NEW_RECOVERY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    EXISTING_RECOVERY_IDENTIFIER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    NEW_RECOVERY_IDENTIFIER_KIND_FIELD_NUMBER: _ClassVar[int]
    RELYING_PARTY_FIELD_NUMBER: _ClassVar[int]
    new_recovery_identifier: str
    existing_recovery_identifier_signature: bytes
    new_recovery_identifier_kind: IdentifierKind
    relying_party: str
    def __init__(self, new_recovery_identifier: _Optional[str] = ..., existing_recovery_identifier_signature: _Optional[bytes] = ..., new_recovery_identifier_kind: _Optional[_Union[IdentifierKind, str]] = ..., relying_party: _Optional[str] = ...) -> None: ...

class IdentityAction(_message.Message):
    __slots__ = ("create_inbox", "add", "revoke", "change_recovery_address")
    CREATE_INBOX_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    CHANGE_RECOVERY_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    create_inbox: CreateInbox
    add: AddAssociation
    revoke: RevokeAssociation
    change_recovery_address: ChangeRecoveryAddress
    def __init__(self, create_inbox: _Optional[_Union[CreateInbox, _Mapping]] = ..., add: _Optional[_Union[AddAssociation, _Mapping]] = ..., revoke: _Optional[_Union[RevokeAssociation, _Mapping]] = ..., change_recovery_address: _Optional[_Union[ChangeRecoveryAddress, _Mapping]] = ...) -> None: ...

class IdentityUpdate(_message.Message):
    __slots__ = ("actions", "client_timestamp_ns", "inbox_id")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedCompositeFieldContainer[IdentityAction]
    client_timestamp_ns: int
    inbox_id: str
    def __init__(self, actions: _Optional[_Iterable[_Union[IdentityAction, _Mapping]]] = ..., client_timestamp_ns: _Optional[int] = ..., inbox_id: _Optional[str] = ...) -> None: ...
