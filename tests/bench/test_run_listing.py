"""The run listing benchmark's code on a small tenant: the local stack in process, its jobs created through
the API, its runs through the runs store and the indexer; every figure is produced and every check passes.
No timing is asserted."""

from __future__ import annotations

from bench.run_listing import NEXT_PAGES, markdown, run


def test_a_small_tenant_gives_every_figure_and_passes_every_check() -> None:
    figures = run(jobs=50, runs=800, days=1.0, trials=1, repeats=2)

    assert figures.problems == []
    assert sum(figures.statuses.values()) == 800
    assert figures.index["chunks"] > 0
    assert len(figures.first_pages) == 6
    for timing in (*figures.first_pages.values(), figures.next_pages, figures.stats):
        assert timing.all and all(value > 0 for value in timing.all)
    assert len(figures.next_pages.all) == 2 * NEXT_PAGES
    assert figures.first_counts["unfiltered"] == 100
    assert figures.first_counts["job_id=one job"] > 0
    assert figures.running_walk[2] > 0
    assert len(figures.cli_lines) == 3
    unfiltered = figures.profiles[0]
    assert unfiltered.name == "the first page, unfiltered,"
    assert unfiltered.calls["BatchGetItem"] == 1
    assert unfiltered.rows

    text = markdown(figures)
    assert text.startswith("## Run listing at 50 jobs and 800 runs\n")
    assert "`python -m bench --only run_listing`" in text
    assert "| first page, unfiltered | 100 |" in text
    assert "All passed." in text
    assert "Where the time of the first page, unfiltered, goes" in text
