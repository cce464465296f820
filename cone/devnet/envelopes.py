"""Stored rows to D14N envelopes: the three nested levels a D14N client decodes.

OriginatorEnvelope → serialized UnsignedOriginatorEnvelope → serialized
PayerEnvelope → serialized ClientEnvelope → the payload, which is the V3 input the
row was stored from. The originator and sequence id come from cone/devnet/topics.py;
`originator_ns` is the time the devnet stored the row, so it increases with the
sequence. Nothing is signed (libxmtp 1.10 verifies no signature): chain-sequenced
payloads (originators 0 and 1) carry a `BlockchainProof` whose hash names the row,
the devnet's own writes carry no proof. Fees are 0.
"""

from __future__ import annotations

import hashlib
from typing import Final

from cone.devnet import topics
from cone.devnet.store import GroupMessageRow, IdentityUpdateRow, KeyPackageRow, WelcomeRow
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtpv4 import envelopes_pb2 as env

#: What xmtpd's gateway asks nodes to keep a payload for.
RETENTION_DAYS: Final = 60
_DAY_S: Final = 86_400
_CHAIN: Final = frozenset({topics.ORIGINATOR_COMMITS, topics.ORIGINATOR_IDENTITY})


def group_message(row: GroupMessageRow) -> env.OriginatorEnvelope:
    """The envelope of a stored group message."""
    client = env.ClientEnvelope(
        group_message=mls.GroupMessageInput(
            v1=mls.GroupMessageInput.V1(
                data=row.data, sender_hmac=row.sender_hmac, should_push=row.should_push
            )
        )
    )
    client.aad.target_topic = topics.topic(topics.KIND_GROUP_MESSAGES, row.group_id)
    if row.depends_on:
        client.aad.depends_on.ParseFromString(row.depends_on)
    return _wrap(client, row.originator, row.id, row.created_ns)


def welcome(row: WelcomeRow) -> env.OriginatorEnvelope:
    """The envelope of a stored welcome or welcome pointer."""
    if row.is_pointer:
        payload = mls.WelcomeMessageInput(
            welcome_pointer=mls.WelcomeMessageInput.WelcomePointer(
                installation_key=row.installation_key,
                welcome_pointer=row.data,
                hpke_public_key=row.hpke_public_key,
                wrapper_algorithm=row.wrapper_algorithm,
            )
        )
    else:
        payload = mls.WelcomeMessageInput(
            v1=mls.WelcomeMessageInput.V1(
                installation_key=row.installation_key,
                data=row.data,
                hpke_public_key=row.hpke_public_key,
                wrapper_algorithm=row.wrapper_algorithm,
                welcome_metadata=row.welcome_metadata,
            )
        )
    client = env.ClientEnvelope(welcome_message=payload)
    client.aad.target_topic = topics.topic(topics.KIND_WELCOME_MESSAGES, row.installation_key)
    return _wrap(client, row.originator, row.id, row.created_ns)


def identity_update(inbox_id: str, row: IdentityUpdateRow) -> env.OriginatorEnvelope:
    """The envelope of a stored identity update of the inbox."""
    client = env.ClientEnvelope(identity_update=row.update)
    client.aad.target_topic = topics.identity_topic(inbox_id)
    return _wrap(client, topics.ORIGINATOR_IDENTITY, row.sequence_id, row.server_timestamp_ns)


def key_package(row: KeyPackageRow) -> env.OriginatorEnvelope:
    """The envelope of an installation's stored key package."""
    client = env.ClientEnvelope(
        upload_key_package=mls.UploadKeyPackageRequest(
            key_package=mls.KeyPackageUpload(key_package_tls_serialized=row.key_package),
            is_inbox_id_credential=True,
        )
    )
    client.aad.target_topic = topics.topic(topics.KIND_KEY_PACKAGES, row.installation_key)
    return _wrap(client, row.originator, row.id, row.updated_ns)


def _wrap(
    client: env.ClientEnvelope, originator: int, sequence_id: int, stored_ns: int
) -> env.OriginatorEnvelope:
    payer = env.PayerEnvelope(
        unsigned_client_envelope=client.SerializeToString(),
        target_originator=originator,
        message_retention_days=RETENTION_DAYS,
    )
    unsigned = env.UnsignedOriginatorEnvelope(
        originator_node_id=originator,
        originator_sequence_id=sequence_id,
        originator_ns=stored_ns,
        payer_envelope_bytes=payer.SerializeToString(),
        expiry_unixtime=stored_ns // 1_000_000_000 + RETENTION_DAYS * _DAY_S,
    )
    out = env.OriginatorEnvelope(unsigned_originator_envelope=unsigned.SerializeToString())
    if originator in _CHAIN:
        name = f"cone-devnet/{originator}/{sequence_id}".encode()
        out.blockchain_proof.transaction_hash = hashlib.sha256(name).digest()
    return out
