"""The published tables are generated from the code and must match it."""
from pathlib import Path

from rmqpy.tools import codes_table

ROOT = Path(__file__).resolve().parents[2]


def test_request_code_table_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "request-codes.md").read_text()
    assert committed == codes_table.render(), "run: python -m rmqpy.tools.codes_table > docs/request-codes.md"
