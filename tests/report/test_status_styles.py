"""One status palette: the run table and `envcheck image verify`'s matrix colour a status the same way."""

from __future__ import annotations

from rich.text import Text

from envcheck.core.result import Result, Status
from envcheck.core.run_report import RunReport
from envcheck.images.docker_run import ImageRun
from envcheck.images.verify import matrix_table
from envcheck.report.table import STATUS_STYLES, result_table


def test_every_status_has_one_style_used_by_both_tables() -> None:
    results = [Result(status=s, summary=s.value).named(f"t.{s.value}", 0.0) for s in Status]
    run_cells = result_table(results).columns[1]._cells
    matrix_cells = (
        matrix_table([ImageRun(image="img:1", report=RunReport(results), exit_code=1)]).columns[1]._cells
    )
    assert set(STATUS_STYLES) == set(Status)
    for status, run_cell, matrix_cell in zip(
        Status, run_cells, matrix_cells[:-1], strict=True
    ):  # last: the container row
        assert isinstance(run_cell, Text) and isinstance(matrix_cell, Text)
        assert run_cell.style == matrix_cell.style == STATUS_STYLES[status], status
