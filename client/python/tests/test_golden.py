"""Item 4: every golden file of bridge/wire/testdata decodes into the SDK's
message types and re-encodes to the same JSON, and every message type the
Go package defines has a payload class here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from boxwire import wire
from boxwire._codec import from_dict, to_dict
from boxwire.errors import CODES

REPO = Path(__file__).resolve().parents[3]
GOLDEN = sorted((REPO / "bridge" / "wire" / "testdata").glob("*.json"))


def test_golden_files_exist() -> None:
    assert len(GOLDEN) > 40


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_roundtrip(path: Path) -> None:
    original = json.loads(path.read_text())
    env = wire.Envelope.from_json(path.read_text())
    payload = env.payload()
    again = wire.Envelope(env.type, env.thread, env.seq, env.id, wire.encode_payload(payload))
    assert json.loads(again.to_json()) == original
    if isinstance(payload, wire.History):  # the events inside are messages too
        for inner in payload.events:
            assert wire.encode_payload(inner.payload()) == inner.data


# The HTTP API's bodies (bridge/wire/testdata/http) round-trip too.
HTTP_BODIES: dict[str, type] = {
    "thread_info": wire.ThreadInfo,
    "thread_info_suspended": wire.ThreadInfo,
    "image_list": wire.ImageList,
}
HTTP_GOLDEN = sorted((REPO / "bridge" / "wire" / "testdata" / "http").glob("*.json"))


def test_every_http_golden_has_a_class() -> None:
    assert sorted(p.stem for p in HTTP_GOLDEN) == sorted(HTTP_BODIES)


@pytest.mark.parametrize("path", HTTP_GOLDEN, ids=lambda p: p.stem)
def test_http_golden_roundtrip(path: Path) -> None:
    original = json.loads(path.read_text())
    body = from_dict(HTTP_BODIES[path.stem], original)  # strict: every field known
    assert to_dict(body) == original


def _go_constants(pattern: str) -> set[str]:
    found: set[str] = set()
    for src in (REPO / "bridge" / "wire").glob("*.go"):
        if not src.name.endswith("_test.go"):
            found |= set(re.findall(pattern, src.read_text()))
    return found


def test_every_message_type_known() -> None:
    assert _go_constants(r'Type = "([a-z_]+)"') == set(wire.PAYLOADS)


def test_every_error_code_known() -> None:
    assert _go_constants(r'Code = "([a-z_]+)"') <= CODES


def test_unknown_field_is_refused() -> None:
    with pytest.raises(wire.ProtocolError):
        wire.decode_payload(wire.TOOL_OUTPUT, {"call_id": "c", "output": "x", "new_field": 1})


def test_terminal_frame_roundtrip() -> None:
    frame = wire.encode_frame(wire.FRAME_INPUT, "term_1", b"ls\n")
    assert frame[0] == 0x12
    assert wire.parse_frame(frame) == (wire.FRAME_INPUT, "term_1", b"ls\n")
