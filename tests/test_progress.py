"""Progress display: text lines for headless runs, bars otherwise, chosen by argument or $GPED_PROGRESS."""

from __future__ import annotations

import io

import pytest

from gped_kit.progress import PROGRESS_ENV, Progress, ProgressMode, progress_mode, status_line


def test_mode_follows_argument_then_environment(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert progress_mode(True) is ProgressMode.BAR
    assert progress_mode(False) is ProgressMode.OFF
    monkeypatch.setenv(PROGRESS_ENV, "lines")
    assert progress_mode(True) is ProgressMode.LINES
    assert progress_mode("bar") is ProgressMode.BAR
    assert progress_mode(False) is ProgressMode.OFF


def test_unknown_mode_names_parameter_and_allowed(monkeypatch):
    with pytest.raises(ValueError, match=r"progress='barz'.*allowed: \['bar', 'lines', 'off'\]"):
        progress_mode("barz")
    monkeypatch.setenv(PROGRESS_ENV, "verbose")
    with pytest.raises(ValueError, match=r"\$GPED_PROGRESS='verbose'"):
        progress_mode(True)


def test_lines_at_start_each_fifth_and_end():
    out = io.StringIO()
    p = Progress(100, "GPED", "it", mode="lines", stream=out)
    for step in range(10, 101, 10):
        p.update(step, teacher_nll=0.5 / step)
    p.close()
    p.close()  # idempotent
    lines = out.getvalue().splitlines()
    assert lines[0] == "GPED: 100 it"
    # 20, 40, 60, 80 crossed, then the closing line at 100
    assert [line.split(" ")[1] for line in lines[1:]] == ["20/100", "40/100", "60/100", "80/100", "100/100"]
    assert "left" in lines[1] and "in all" in lines[-1] and "teacher_nll=0.005" in lines[-1]


def test_resumed_run_starts_counting_at_its_position():
    out = io.StringIO()
    p = Progress(100, "GPED", mode="lines", initial=50, stream=out)
    p.update(70)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "GPED: resuming at 50/100 it"
    assert lines[1].startswith("GPED: 70/100 it (70%)")  # 60% crossed; 20% and 40% were before the resume


def test_off_prints_nothing():
    out = io.StringIO()
    p = Progress(10, "x", mode="off", stream=out)
    p.update(10)
    p.close()
    assert out.getvalue() == ""


def test_status_lines_follow_the_same_switch(monkeypatch):
    """``GPED_PROGRESS=off`` (the batch runner's choice) keeps a grid's status lines out of a notebook too."""
    out = io.StringIO()
    monkeypatch.setenv(PROGRESS_ENV, "off")
    status_line("[1/2] fcnn: reused (0.1 s)", stream=out)
    assert out.getvalue() == ""
    monkeypatch.setenv(PROGRESS_ENV, "lines")
    status_line("[1/2] fcnn: reused (0.1 s)", stream=out)
    status_line("[2/2] cnn: ran (9.0 s)", progress=False, stream=out)  # the caller's False wins
    assert out.getvalue() == "[1/2] fcnn: reused (0.1 s)\n"
