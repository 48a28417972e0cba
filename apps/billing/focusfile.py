"""Reading a FOCUS 1.0-1.3 cost and usage file (CSV, gzipped CSV or Parquet) into typed rows.

Pure: bytes in, `BillRow`s out, no table touched. A file is read whole before anything is written, and the first
value that cannot be read refuses the whole file with its row and column named (`BillFileError`): a bill is money,
so a half-read one is worse than none. Only the columns the import uses are checked; the others are carried as
they are. Spec: FOCUS_Spec v1.0-v1.3 `columns/*.md`; real quirks seen in the FinOps Foundation's sample export
(tests/fixtures/focus_bills.py): `NULL` for null, `2024-09-04 05:00:00` timestamps without a zone (UTC), costs
with eleven decimals, unreadable JSON in `Tags`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

NULLS = frozenset({"", "NULL", "null", "None"})
# Without these a row cannot be priced, placed in time or told apart: a file lacking one is refused.
REQUIRED = ("BilledCost", "EffectiveCost", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
            "BillingCurrency", "ResourceId")
# FOCUS 1.3 moved ProviderName to ServiceProviderName (ProviderName kept, deprecated): either names the cloud.
PROVIDER_COLUMNS = ("ServiceProviderName", "ProviderName")
# A version's own columns, newest first: the file's version is the newest whose marker columns it has.
VERSION_MARKERS = (
    ("1.3", ("AllocatedMethodId", "ServiceProviderName", "HostProviderName")),
    ("1.2", ("InvoiceId", "PricingCurrency", "BillingAccountType")),
    ("1.1", ("CapacityReservationId", "ServiceSubcategory", "SkuMeter")),
)
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"


class BillFileError(ValueError):
    """The file cannot be imported; `row` is the 1-based data row (the header is row 0), `column` the column."""

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None) -> None:
        where = ", ".join(part for part in (f"row {row}" if row is not None else "",
                                            f"column {column}" if column else "") if part)
        super().__init__(f"{where}: {message}" if where else message)
        self.row, self.column = row, column


@dataclass(frozen=True)
class BillRow:
    """One charge of the bill, with the columns the import reads, typed."""

    row: int  # 1-based data row in the file
    provider: str
    billing_account_id: str
    billing_period_start: datetime | None
    charge_category: str
    charge_period_start: datetime
    charge_period_end: datetime
    billed_cost: Decimal
    effective_cost: Decimal
    currency: str
    resource_id: str
    resource_name: str
    resource_type: str
    service_category: str
    description: str  # ChargeDescription
    sku_details: str  # SkuPriceDetails (1.1+) as written: its InstanceType names the machine type
    pricing_quantity: Decimal | None
    pricing_unit: str
    tags: dict[str, str] = field(default_factory=dict)
    tags_unreadable: bool = False  # the Tags value was not a JSON object: kept out of tag matching, reported


@dataclass(frozen=True)
class BillFile:
    version: str  # "1.0".."1.3", from the columns present
    rows: tuple[BillRow, ...]
    columns: tuple[str, ...]


def read_bill(data: bytes) -> BillFile:
    """The rows of a FOCUS file; the format is told from the bytes (Parquet magic, gzip magic, else CSV)."""
    if data[:4] == PARQUET_MAGIC:
        columns, records = _parquet_records(data)
    else:
        if data[:2] == GZIP_MAGIC:
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise BillFileError(f"the gzip stream is broken ({exc})") from exc
        columns, records = _csv_records(data)
    missing = [c for c in REQUIRED if c not in columns]
    if not any(c in columns for c in PROVIDER_COLUMNS):
        missing.append("ProviderName")
    if missing:
        raise BillFileError(f"not a FOCUS cost and usage file: no column {', '.join(missing)}", row=0)
    rows = tuple(_row(i, rec) for i, rec in enumerate(records, start=1))
    return BillFile(version=focus_version(columns), rows=rows, columns=tuple(columns))


def focus_version(columns: Iterable[str]) -> str:
    present = set(columns)
    for version, markers in VERSION_MARKERS:
        if any(m in present for m in markers):
            return version
    return "1.0"


def _csv_records(data: bytes) -> tuple[list[str], Iterable[Mapping[str, Any]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BillFileError(f"not UTF-8 text (byte {exc.start})") from exc
    try:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        header = next(reader, None)
        if not header:
            raise BillFileError("the file is empty", row=0)
        header = [h.strip() for h in header]
        records = []
        for number, values in enumerate(reader, start=1):
            if not values:
                continue
            if len(values) != len(header):
                raise BillFileError(f"{len(values)} values for {len(header)} columns", row=number)
            records.append(dict(zip(header, values, strict=True)))
    except csv.Error as exc:
        raise BillFileError(f"unreadable CSV ({exc})", row=reader.line_num) from exc
    return header, records


def _parquet_records(data: bytes) -> tuple[list[str], Iterable[Mapping[str, Any]]]:
    import pyarrow as pa  # imported here: only Parquet files need it
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise BillFileError(f"unreadable Parquet ({exc})") from exc
    return list(table.column_names), table.to_pylist()


def _row(number: int, rec: Mapping[str, Any]) -> BillRow:
    def text(column: str) -> str:
        value = rec.get(column)
        if value is None:
            return ""
        value = str(value).strip()
        return "" if value in NULLS else value

    def money(column: str) -> Decimal:
        value = _decimal(rec.get(column), number, column)
        if value is None:
            raise BillFileError("a cost is required", row=number, column=column)
        return value

    def when(column: str, *, required: bool = True) -> datetime | None:
        value = rec.get(column)
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
        raw = text(column)
        if not raw:
            if required:
                raise BillFileError("a time is required", row=number, column=column)
            return None
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError as exc:
            raise BillFileError(f"{raw[:40]!r} is not an ISO 8601 time", row=number, column=column) from exc
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

    start, end = when("ChargePeriodStart"), when("ChargePeriodEnd")
    assert start is not None and end is not None  # required above
    if end <= start:
        raise BillFileError(f"ChargePeriodEnd {end:%Y-%m-%dT%H:%M:%SZ} is not after ChargePeriodStart",
                            row=number, column="ChargePeriodEnd")
    category = text("ChargeCategory")
    if not category:
        raise BillFileError("a charge category is required", row=number, column="ChargeCategory")
    currency = text("BillingCurrency")
    if not currency:
        raise BillFileError("a currency is required", row=number, column="BillingCurrency")
    tags, unreadable = _tags(rec.get("Tags"))
    return BillRow(
        row=number,
        provider=next((text(c) for c in PROVIDER_COLUMNS if text(c)), ""),
        billing_account_id=text("BillingAccountId"),
        billing_period_start=when("BillingPeriodStart", required=False),
        charge_category=category,
        charge_period_start=start,
        charge_period_end=end,
        billed_cost=money("BilledCost"),
        effective_cost=money("EffectiveCost"),
        currency=currency,
        resource_id=text("ResourceId"),
        resource_name=text("ResourceName"),
        resource_type=text("ResourceType"),
        service_category=text("ServiceCategory"),
        description=text("ChargeDescription"),
        sku_details=_json_text(rec.get("SkuPriceDetails")),
        pricing_quantity=_decimal(rec.get("PricingQuantity"), number, "PricingQuantity"),
        pricing_unit=text("PricingUnit"),
        tags=tags,
        tags_unreadable=unreadable,
    )


def _decimal(value: Any, row: int, column: str) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, float):
        number = Decimal(repr(value))  # the shortest decimal that is this float: no binary noise
    elif isinstance(value, int):
        number = Decimal(value)
    else:
        raw = str(value).strip()
        if raw in NULLS:
            return None
        try:
            number = Decimal(raw)
        except InvalidOperation as exc:
            raise BillFileError(f"{raw[:40]!r} is not a number", row=row, column=column) from exc
    if not number.is_finite():
        raise BillFileError(f"{number} is not a finite number", row=row, column=column)
    return number


def _tags(value: Any) -> tuple[dict[str, str], bool]:
    """Tags as a str -> str dict, and whether the value was unreadable (written by tenants: never fatal)."""
    if value is None:
        return {}, False
    if isinstance(value, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}, False
    if isinstance(value, list):  # Parquet MAP<string,string> reads as [(key, value), ...]
        try:
            return {str(k): "" if v is None else str(v) for k, v in value}, False
        except (TypeError, ValueError):
            return {}, True
    raw = str(value).strip()
    if raw in NULLS:
        return {}, False
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}, True
    if not isinstance(parsed, dict):
        return {}, True
    return {str(k): "" if v is None else str(v) for k, v in parsed.items()}, False


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping | list):
        return json.dumps(value, default=str)
    raw = str(value).strip()
    return "" if raw in NULLS else raw
