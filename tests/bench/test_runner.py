"""The benchmark runner: section selection and the document it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import SECTIONS, main, names


def test_sections_run_in_the_listed_order_with_cost_after_lag() -> None:
    assert SECTIONS.index("bench.cost") == SECTIONS.index("bench.lag") + 1
    assert names("simulate,lag") == ["bench.lag", "bench.simulate"]
    assert names(None) == list(SECTIONS)


def test_an_unknown_section_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown section"):
        names("lag,nope")


def test_the_document_has_the_header_and_each_section(tmp_path: Path) -> None:
    output = tmp_path / "benchmarks.md"
    assert main(["--only", "simulate", "--output", str(output)]) == 0
    text = output.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "Machine: " in text
    assert "\n## Capacity model and burst simulation\n" in text
    assert "`python -m bench.simulate`" in text
