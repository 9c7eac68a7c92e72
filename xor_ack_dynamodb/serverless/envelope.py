"""The envelope: how a chain's tag, a message's edge and the chain's owner travel, and
where (docs/lambda.md, "The envelope"). Decoding never guesses, and raises before any
request: no envelope is :class:`MissingEnvelope`, an unreadable one
:class:`MalformedEnvelope` (an edge of the other mode: :class:`EnvelopeModeMismatch`),
any other ``v`` :class:`UnsupportedEnvelopeVersion`; fields a reader does not know are
ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.algebra import Mode
from ..core.factory import MAX_OWNER
from ..errors import InvalidConfig, InvalidTag
from ..stamps import Position, check_tag
from .edges import Edge, edge_text
from .errors import EnvelopeModeMismatch, MalformedEnvelope, MissingEnvelope, UnsupportedEnvelopeVersion

#: The name of the SQS message attribute, the SNS message attribute, the body form's key
#: and the S3 user-metadata key.
ATTRIBUTE = "xor-ack"
#: The envelope version this library writes and reads.
VERSION = 1
#: S3 keeps at most 2 KB of user metadata per object (names and values).
S3_METADATA_LIMIT = 2048


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a tracked message carries: the chain's ``tag``, the ``edge`` this message
    finishes (bytes in xor mode, an int in sum mode), the chain's ``owner`` (stamps pass
    it, so a late message of an older chain of the same tag is refused) and ``after``,
    the position of the stamp that sent it, where its own stamp's check for earlier
    copies starts (None from an older writer: the chain's start)."""

    tag: str
    edge: Edge
    owner: str
    mode: Mode
    after: Position | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "v": VERSION,
            "tag": self.tag,
            "mode": self.mode,
            "edge": edge_text(self.edge),
            "owner": self.owner,
        }
        if self.after is not None:
            out["after"] = str(self.after)
        return out

    def to_json(self) -> str:
        """The envelope as compact ASCII JSON (ASCII so that S3 metadata can carry it)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=True)

    def sqs_attributes(self) -> dict[str, dict[str, str]]:
        """The ``MessageAttributes`` (SQS, SNS) carrying this envelope."""
        return {ATTRIBUTE: {"DataType": "String", "StringValue": self.to_json()}}

    def body_form(self, body: Any) -> dict[str, Any]:
        """``body`` wrapped with the envelope: send it as a JSON body (SQS, SNS) or as an
        EventBridge event's ``detail``."""
        return {ATTRIBUTE: self.to_dict(), "body": body}

    def s3_metadata(self) -> dict[str, str]:
        """The ``Metadata`` of ``PutObject`` carrying this envelope. Raises
        :class:`MalformedEnvelope` if it would exceed S3's 2 KB of user metadata (a tag
        of over about 1.8 KB)."""
        text = self.to_json()
        if len(ATTRIBUTE) + len(text) > S3_METADATA_LIMIT:
            raise MalformedEnvelope(
                f"the envelope is {len(text)} bytes; S3 keeps at most {S3_METADATA_LIMIT} bytes of "
                "metadata: use a shorter tag",
                tag=self.tag,
            )
        return {ATTRIBUTE: text}


@dataclass(frozen=True, slots=True)
class Message:
    """A received message: its envelope and the user's body (a ``str``: the body form's
    JSON ``body`` serialized back unless it was one)."""

    envelope: Envelope
    body: str


def from_json(text: object, mode: Mode | None = None) -> Envelope:
    """Parse an envelope's JSON (see the module doc for what it raises); with ``mode``, an
    edge of the other mode is :class:`EnvelopeModeMismatch`."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedEnvelope("the envelope is not UTF-8") from None
    if not isinstance(text, str):
        raise MalformedEnvelope(f"the envelope must be a JSON string, not {type(text).__name__}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise MalformedEnvelope(f"the envelope is not JSON: {exc}") from None
    return from_dict(data, mode)


def from_dict(data: object, mode: Mode | None = None) -> Envelope:
    """Read an envelope from its JSON object (see :func:`from_json`)."""
    if not isinstance(data, dict):
        raise MalformedEnvelope(f"the envelope must be a JSON object, not {type(data).__name__}")
    version = data.get("v")
    if isinstance(version, bool) or not isinstance(version, int):
        raise MalformedEnvelope(f"the envelope's 'v' must be an integer version, got {version!r}")
    if version != VERSION:
        raise UnsupportedEnvelopeVersion(
            f"envelope version {version} is not readable by this library (it reads version {VERSION})"
        )
    try:
        tag = check_tag(data.get("tag"))
    except InvalidTag as exc:
        raise MalformedEnvelope(f"the envelope's 'tag' is unusable: {exc}") from None
    found = data.get("mode")
    if found not in ("xor", "sum"):
        raise MalformedEnvelope(f"the envelope's 'mode' must be 'xor' or 'sum', got {found!r}", tag=tag)
    if mode is not None and found != mode:
        raise EnvelopeModeMismatch(
            f"the envelope carries a {found}-mode edge; this pipeline runs in {mode} mode", tag=tag
        )
    owner = data.get("owner")
    if not isinstance(owner, str) or not 1 <= len(owner) <= MAX_OWNER:
        raise MalformedEnvelope(
            f"the envelope's 'owner' must be a str of 1 to {MAX_OWNER} characters", tag=tag
        )
    after = data.get("after")
    if after is not None:
        try:
            after = Position.parse(after) if isinstance(after, str) else None
        except InvalidConfig:
            after = None
        if after is None:
            raise MalformedEnvelope("the envelope's 'after' must be a chain position", tag=tag)
    return Envelope(tag, _edge(data.get("edge"), found, tag), owner, found, after)


def _edge(text: object, mode: str, tag: str) -> Edge:
    if not isinstance(text, str) or not text:
        raise MalformedEnvelope("the envelope's 'edge' must be a non-empty string", tag=tag)
    if mode == "sum":
        if not text.isascii() or not text.isdigit() or len(text) > 20:
            raise MalformedEnvelope("a sum-mode edge must be decimal digits", tag=tag)
        value = int(text)
        if not 0 < value < 2**64:
            raise MalformedEnvelope("a sum-mode edge must be in [1, 2**64)", tag=tag)
        return value
    try:
        edge = bytes.fromhex(text)
    except ValueError:
        raise MalformedEnvelope("an xor-mode edge must be hex digits", tag=tag) from None
    if not 1 <= len(edge) <= 64 or not any(edge):
        raise MalformedEnvelope("an xor-mode edge must be 1 to 64 bytes, not all zeros", tag=tag)
    return edge


def decode_body_form(data: object, mode: Mode | None = None) -> Message | None:
    """A message from the JSON body form (``{"xor-ack": {...}, "body": ...}``), or None
    if ``data`` is not one. Raises :class:`MalformedEnvelope` for a body form whose
    envelope is unreadable."""
    if not isinstance(data, dict) or ATTRIBUTE not in data:
        return None
    envelope = from_dict(data[ATTRIBUTE], mode)
    body = data.get("body")
    return Message(envelope, body if isinstance(body, str) else json.dumps(body))


def _attribute(attributes: object, *names: str) -> Any:
    """The value of the ``xor-ack`` attribute in an SQS (Lambda's ``stringValue`` or
    boto3's ``StringValue``) or SNS (``Value``) attribute map, or None."""
    if not isinstance(attributes, Mapping):
        return None
    found = attributes.get(ATTRIBUTE)
    if found is None:
        return None
    if not isinstance(found, Mapping):
        raise MalformedEnvelope(f"the {ATTRIBUTE!r} attribute is not an attribute map")
    for name in names:
        if name in found:
            return found[name]
    raise MalformedEnvelope(f"the {ATTRIBUTE!r} attribute has no string value (use DataType String)")


def _parsed(text: object) -> object:
    """``text`` parsed as JSON; None when it is not a JSON string."""
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def decode_record(record: Mapping[str, Any], mode: Mode | None = None) -> Message:
    """The envelope and body of one SQS record (from Lambda's event or boto3's
    ``receive_message``). Looked for, in order: the ``xor-ack`` message attribute; the
    body form in the body; an SNS notification (the attribute in its
    ``MessageAttributes``, or the body form in its ``Message``); an EventBridge event (the
    body form in its ``detail``). Raises :class:`MissingEnvelope` when none is there,
    :class:`MalformedEnvelope` (or a subclass) when one is unreadable or the record has
    no string body."""
    attributes = record.get("messageAttributes", record.get("MessageAttributes"))
    body = record.get("body", record.get("Body"))
    if not isinstance(body, str):
        raise MalformedEnvelope("the record has no string body")
    text = _attribute(attributes, "stringValue", "StringValue")
    if text is not None:
        return Message(from_json(text, mode), body)
    data = _parsed(body)
    found = decode_body_form(data, mode)
    if found is None and isinstance(data, dict) and data.get("Type") == "Notification" and "Message" in data:
        inner = data["Message"]
        text = _attribute(data.get("MessageAttributes"), "Value")
        if text is not None:
            return Message(from_json(text, mode), inner if isinstance(inner, str) else json.dumps(inner))
        found = decode_body_form(_parsed(inner), mode)
    if found is None and isinstance(data, dict) and "detail-type" in data and "detail" in data:
        found = decode_body_form(data["detail"], mode)
    if found is not None:
        return found
    raise MissingEnvelope(
        f"the message carries no {ATTRIBUTE!r} envelope (message attribute, JSON body form, "
        "SNS or EventBridge wrapper)"
    )


def decode_s3_metadata(metadata: Mapping[str, str] | None, mode: Mode | None = None) -> Envelope | None:
    """The envelope in an S3 object's user metadata (``HeadObject``'s ``Metadata``), or
    None when it has none. Raises :class:`MalformedEnvelope` for an unreadable one."""
    text = (metadata or {}).get(ATTRIBUTE)
    return None if text is None else from_json(text, mode)
