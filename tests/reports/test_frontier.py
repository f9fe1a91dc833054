"""`ppdsl frontier` (issue 18, 4): makespan against memory limit for synth, with and without memory actions, and
the library's anchors at their own peaks."""

from __future__ import annotations

from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.reports.frontier import draw_frontier, frontier, ladder

runner = CliRunner()


def test_ladder_runs_from_low_to_high():
    assert ladder(1, 4, 4) == [1, 2, 3, 4]
    assert ladder(2, 2, 5) == [2]


def test_the_frontier_falls_with_memory_and_actions_never_lose(tmp_path):
    fr = frontier(2, 4, limits=[1, 2], time_limit=0.5)
    tight, loose = fr.points
    assert tight.order_only is not None and tight.with_actions is not None
    assert tight.with_actions <= tight.order_only and loose.with_actions <= tight.with_actions
    # 1F1B (peak 2 on rank 0) is an anchor that fits the loose limit and not the tight one
    assert any(a.name == "1F1B" and a.peak == 2 for a in fr.anchors)
    assert fr.best_anchor(2) is not None and fr.best_anchor(2).peak <= 2
    png = tmp_path / "frontier.png"
    draw_frontier(fr, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_prints_the_table(tmp_path):
    result = runner.invoke(app, ["frontier", "--pp", "2", "-m", "4", "--steps", "2", "--time-limit", "0.5"])
    assert result.exit_code == 0, result.output
    assert "synth (actions)" in result.output and "best anchor" in result.output


def test_a_looser_limit_is_never_slower_on_the_frontier(monkeypatch):
    """Whatever synth finds at each limit, the frontier is monotone: a schedule found under a limit fits every
    looser one (here synth is made to find a slower schedule at the looser limit)."""
    import types

    import ppdsl.reports.frontier as module

    found = {(1.0, False): 30.0, (1.0, True): 28.0, (2.0, False): 31.0, (2.0, True): 29.0, (3.0, False): 25.0}

    def fake(request):
        acts = bool(request.memory_actions)
        makespan = found.get((request.memory_limit, acts), found.get((request.memory_limit, False)))
        result = types.SimpleNamespace(makespan=makespan, origin=f"fake at {request.memory_limit:g}")
        return types.SimpleNamespace(result=result)

    monkeypatch.setattr(module, "synthesize_file", fake)
    monkeypatch.setattr(module, "anchors", lambda base: [])
    fr = frontier(2, 4, limits=[2.0, 1.0, 3.0])
    assert [p.limit for p in fr.points] == [1.0, 2.0, 3.0]
    assert [p.order_only for p in fr.points] == [30.0, 30.0, 25.0]
    assert [p.with_actions for p in fr.points] == [28.0, 28.0, 25.0]
    assert "found at limit 1" in fr.points[1].actions


def test_the_picture_goes_through_the_one_writer(tmp_path, monkeypatch):
    """`frontier -o` wrote with matplotlib's own `savefig(path)`, which follows whatever symlink is there when the
    long search ends: another user's link planted during the search is refused (E058), its target kept."""
    import os

    import pytest

    from ppdsl.reports import frontier as module

    if os.geteuid() != 0:
        pytest.skip("making another user's symlink needs root")
    precious = tmp_path / "precious.conf"
    precious.write_text("root's own\n")
    out = tmp_path / "frontier.png"
    searched = module.frontier

    def search_then_plant(*args, **kwargs):
        found = searched(*args, **kwargs)
        out.symlink_to(precious)
        os.lchown(out, 12345, 12345)
        return found

    monkeypatch.setattr(module, "frontier", search_then_plant)
    args = ["frontier", "--pp", "2", "-m", "4", "--steps", "2", "--time-limit", "0.5", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "error[E058]" in result.stderr, result.output
    assert precious.read_text() == "root's own\n"
