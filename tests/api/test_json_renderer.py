"""The API's JSON (apps/common/renderers.py `DecimalJSONRenderer`): written by orjson for compact answers, it must
read back exactly as DRF's `json.dumps` output does, byte for byte where floats print alike, with money as decimal
strings, datetimes in DRF's format, JavaScript's line separators escaped, and DRF's encoder for what orjson refuses
and for indented output. Pure: no database."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from apps.common.renderers import DecimalJSONEncoder, DecimalJSONRenderer


class _DrfOnly(JSONRenderer):
    """What the renderer wrote before orjson: DRF's JSONRenderer with the money encoder."""

    encoder_class = DecimalJSONEncoder


ANSWERS = [
    {"start": datetime(2026, 11, 25, tzinfo=UTC), "end": datetime(2026, 12, 2, 7, 30, 5, 123456, tzinfo=UTC),
     "group_by": ["team", "day"], "currency": "USD", "provisional": False, "coverage": None,
     "results": [{"team": "vision", "day": "2026-11-25", "allocated_gpu_hours": 8694.519879,
                  "cost": Decimal("27471.497237"), "idle_cost": Decimal("0.000000"), "coverage": 0.998507}],
     "totals": {"cost": Decimal("-1.500000"), "unpriced_gpu_hours": 0.0}},
    ReturnDict({"name": "team-03", "display_name": "", "created": date(2026, 1, 2), "id": uuid.UUID(int=7),
                "window": timedelta(hours=1, seconds=3), "at": time(7, 8, 9, 123456), "label": gettext_lazy("Teams")},
               serializer=None),
    ReturnList([{"tenant": "é ü 漢字 \x00 \" \\ \n"}, 1, 2.5, True, None, [], {}], serializer=None),
    {"nested": {"deep": [[[Decimal("1E+3"), Decimal("0.1")]]]}, "big": 2**62, "neg": -0.0},
]


@pytest.mark.parametrize("data", ANSWERS)
def test_compact_answers_are_byte_for_byte_what_drf_wrote(data):
    assert DecimalJSONRenderer().render(data) == _DrfOnly().render(data)


def test_floats_read_back_as_the_same_floats():
    floats = [1e-7, 1e16, 1.5e300, 5e-324, 0.1 + 0.2, 123456789.123456, -2.5e-5]
    ours, drf = DecimalJSONRenderer().render(floats), _DrfOnly().render(floats)
    assert json.loads(ours) == json.loads(drf) == floats


def test_javascript_line_separators_are_escaped_as_drf_escapes_them():
    data = {"tenant": "a\u2028b\u2029c"}
    assert DecimalJSONRenderer().render(data) == _DrfOnly().render(data) == b'{"tenant":"a\\u2028b\\u2029c"}'


def test_what_orjson_refuses_goes_through_drfs_encoder():
    data = {1: "int key", (2, 3): "never"}
    with pytest.raises(TypeError):  # DRF's own error, as before
        DecimalJSONRenderer().render(data)
    assert DecimalJSONRenderer().render({1: "x"}) == _DrfOnly().render({1: "x"}) == b'{"1":"x"}'
    with pytest.raises(TypeError):
        DecimalJSONRenderer().render({"x": object()})


def test_indented_output_is_drfs():
    data = {"a": [1, Decimal("2.5")]}
    media = "application/json; indent=4"
    assert DecimalJSONRenderer().render(data, media) == _DrfOnly().render(data, media)
    assert b"\n    " in DecimalJSONRenderer().render(data, media)
