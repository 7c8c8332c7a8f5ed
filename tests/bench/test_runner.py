"""The benchmark runner: section selection and the document it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import ON_REQUEST, SECTIONS, compose, main, names, stored_sections


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


def test_a_partial_run_replaces_its_sections_and_keeps_the_others(tmp_path: Path) -> None:
    output = tmp_path / "benchmarks.md"
    kept = "## Cost per run\n\nCommand: `python -m bench.cost`\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    stale = "## Capacity model and burst simulation\n\nstale figures"
    output.write_text(
        compose(
            "a machine",
            {"bench.simulate": ("2000-01-01 00:00", stale), "bench.cost": ("2026-01-02 03:04", kept)},
        )
    )

    assert main(["--only", "simulate", "--output", str(output)]) == 0

    sections = stored_sections(output.read_text())
    assert list(sections) == ["bench.cost", "bench.simulate"]
    assert sections["bench.cost"] == ("2026-01-02 03:04", kept)
    assert "stale figures" not in sections["bench.simulate"][1]
    assert sections["bench.simulate"][1].startswith("## Capacity model and burst simulation\n")
    assert sections["bench.simulate"][0] != "2000-01-01 00:00"


def test_a_full_run_starts_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "benchmarks.md"
    output.write_text(compose("a machine", {"bench.cost": ("2026-01-02 03:04", "## Cost per run\n\nold")}))
    monkeypatch.setattr("bench.__main__.SECTIONS", ("bench.simulate",))

    assert main(["--output", str(output)]) == 0

    assert list(stored_sections(output.read_text())) == ["bench.simulate"]


def test_sections_on_request_run_only_when_named_and_are_kept_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert names("throttle,fairness") == ["bench.fairness", "bench.throttle"]
    assert not set(ON_REQUEST) & set(names(None))
    output = tmp_path / "benchmarks.md"
    fairness = "## Flow control\n\nCommand: `python -m bench --only fairness`"
    output.write_text(
        compose(
            "a machine",
            {
                "bench.cost": ("2026-01-02 03:04", "## Cost per run\n\nold"),
                "bench.fairness": ("2026-11-28 22:00", fairness),
            },
        )
    )
    monkeypatch.setattr("bench.__main__.SECTIONS", ("bench.simulate",))

    assert main(["--output", str(output)]) == 0

    sections = stored_sections(output.read_text())
    assert list(sections) == ["bench.simulate", "bench.fairness"]
    assert sections["bench.fairness"] == ("2026-11-28 22:00", fairness)
