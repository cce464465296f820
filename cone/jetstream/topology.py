"""The streams and consumers cone needs on the JetStream: created when missing,
checked when present (a stream laid out otherwise is an error to fix, never changed
behind the operator's back)."""

from __future__ import annotations

import logging
from typing import Final

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError

from cone.errors import FailedPrecondition
from cone.jetstream.options import JetStreamOptions
from cone.jetstream.subjects import OUT_CONSUMER, Layout

log = logging.getLogger(__name__)

#: How long JetStream remembers a `Nats-Msg-Id`: a daemon that crashed between
#: JetStream's ack and its own cursor and restarts within it exports nothing twice.
DUPLICATE_WINDOW_S: Final = 24 * 3600.0
#: How long outcomes are kept (the last one per key).
OUTCOME_AGE_S: Final = 24 * 3600.0
#: A worker's send or reply: the largest content (1 MB of attachment) in JSON, base64.
OUT_MAX_BYTES: Final = 1_048_576
#: How long the daemon holds a worker's message before JetStream hands it out again:
#: short, so that a daemon killed mid-send resumes soon; a send that runs longer renews
#: it (`replies.PROGRESS_S`).
OUT_ACK_WAIT_S: Final = 10.0
#: Workers' sends and replies cone handles at once.
OUT_MAX_PENDING: Final = 64


def _streams(layout: Layout, options: JetStreamOptions) -> list[StreamConfig]:
    common = {
        "storage": StorageType.FILE,
        "num_replicas": options.replicas,
        "duplicate_window": DUPLICATE_WINDOW_S,
    }
    return [
        # Work queues: a message stays until its consumer acks it, then goes.
        StreamConfig(
            name=layout.stream("in"),
            subjects=[layout.inbound_all],
            retention=RetentionPolicy.WORK_QUEUE,
            **common,  # type: ignore[arg-type]
        ),
        StreamConfig(
            name=layout.stream("out"),
            subjects=[layout.out_all],
            retention=RetentionPolicy.WORK_QUEUE,
            max_msg_size=OUT_MAX_BYTES,
            **common,  # type: ignore[arg-type]
        ),
        StreamConfig(
            name=layout.stream("outcome"),
            subjects=[layout.outcome_all],
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            max_age=OUTCOME_AGE_S,
            **common,  # type: ignore[arg-type]
        ),
    ]


def _consumers(layout: Layout, options: JetStreamOptions) -> list[tuple[str, ConsumerConfig]]:
    stream_in = layout.stream("in")
    out = [
        (
            stream_in,
            ConsumerConfig(
                durable_name=layout.partition_consumer(p),
                filter_subject=layout.partition_filter(p),
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.EXPLICIT,
                # One message of a partition out at a time: its conversations in order.
                max_ack_pending=1,
                ack_wait=options.ack_wait_s,
                max_deliver=options.max_deliver,
            ),
        )
        for p in range(options.partitions)
    ]
    out.append(
        (
            layout.stream("out"),
            ConsumerConfig(
                durable_name=OUT_CONSUMER,
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.EXPLICIT,
                max_ack_pending=OUT_MAX_PENDING,
                ack_wait=OUT_ACK_WAIT_S,
                max_deliver=-1,
            ),
        )
    )
    return out


async def ensure(js: JetStreamContext, layout: Layout, options: JetStreamOptions) -> None:
    """Create what is missing; FailedPrecondition when what exists is laid out otherwise."""
    for want in _streams(layout, options):
        assert want.name is not None
        try:
            info = await js.stream_info(want.name)
        except NotFoundError:
            await js.add_stream(want)
            log.info("jetstream: stream %s created", want.name)
            continue
        have = info.config
        if (
            have.retention != want.retention
            or set(have.subjects or ()) != set(want.subjects or ())
            or (have.duplicate_window or 0) < want.duplicate_window
        ):
            raise FailedPrecondition(
                f"the JetStream stream {want.name} exists with another layout (subjects, "
                f"retention or a duplicate window under {DUPLICATE_WINDOW_S:g} s): remove it "
                "or give another --jetstream-prefix (docs/jetstream.md)",
                reason="jetstream_layout",
            )
    for stream, config in _consumers(layout, options):
        assert config.durable_name is not None
        try:
            have_c = (await js.consumer_info(stream, config.durable_name)).config
        except NotFoundError:
            await js.add_consumer(stream, config)
            log.info("jetstream: consumer %s on %s created", config.durable_name, stream)
            continue
        if have_c.filter_subject != config.filter_subject or (
            have_c.max_ack_pending != config.max_ack_pending
        ):
            raise FailedPrecondition(
                f"the JetStream consumer {config.durable_name} on {stream} exists with "
                "another filter or max_ack_pending: remove it (docs/jetstream.md)",
                reason="jetstream_layout",
            )
        if have_c.ack_wait != config.ack_wait or have_c.max_deliver != config.max_deliver:
            # Both may change on a durable consumer: creating it again updates it.
            await js.add_consumer(stream, config)
            log.info("jetstream: consumer %s on %s updated", config.durable_name, stream)
    extra = layout.partition_consumer(options.partitions)
    try:
        await js.consumer_info(layout.stream("in"), extra)
    except NotFoundError:
        return
    log.warning(
        "jetstream: consumer %s exists beyond %d partitions: drain and remove the old "
        "partitions' consumers after changing --jetstream-partitions (docs/jetstream.md)",
        extra,
        options.partitions,
    )


__all__ = ["DUPLICATE_WINDOW_S", "ensure"]
