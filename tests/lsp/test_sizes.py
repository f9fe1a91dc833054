"""The sizes a file's `# ppdsl:` directive sets stay within what `ppdsl check` takes on by default: the file may be
anyone's (a cloned repository), and the server holds every job a check expands."""

from __future__ import annotations

import pytest

from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.lsp.sizes import Sizes, sizes_for

BODY = "order { forward * microbatches backward * microbatches optimizer }\n"


def test_a_directive_cannot_raise_max_jobs_past_the_default():
    settings = Sizes()
    for asked in (DEFAULT_MAX_JOBS + 1, 2**40, 10**30):
        sizes, diags = sizes_for(f"# ppdsl: --pp 2 -m 4 --max-jobs {asked}\n" + BODY, "big.sched", settings)
        assert sizes == settings and sizes.max_jobs == DEFAULT_MAX_JOBS  # the settings stand
        (diag,) = diags
        assert diag.code == "E098" and diag.span is not None and diag.span.line == 1
        assert f"from 1 to {DEFAULT_MAX_JOBS}" in diag.message and f"`{asked}`" in diag.message
        assert "--max-jobs" in diag.help


def test_a_directive_may_lower_max_jobs():
    sizes, diags = sizes_for("# ppdsl: --pp 2 -m 4 --max-jobs 100\n" + BODY, "small.sched", Sizes())
    assert diags == [] and sizes.max_jobs == 100 and (sizes.pp, sizes.microbatches) == (2, 4)
    sizes, diags = sizes_for(f"# ppdsl: --pp 2 -m 4 --max-jobs={DEFAULT_MAX_JOBS}\n" + BODY, "edge.sched", Sizes())
    assert diags == [] and sizes.max_jobs == DEFAULT_MAX_JOBS


def test_a_limit_in_bytes_is_refused_as_check_refuses_it():
    """The editor checks without a model: `--memory-limit 1KiB` is E088, not a limit of 1024 activations."""
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.language.resolve import resolve_text

    sizes, _ = sizes_for("# ppdsl: --pp 2 -m 4 --memory-limit 1KiB\n" + BODY, "bytes.sched", Sizes())
    with pytest.raises(DiagnosticError) as err:
        sizes.scenarios(resolve_text(BODY, "bytes.sched"))
    assert [d.code for d in err.value.diagnostics] == ["E088"]
    sizes, _ = sizes_for("# ppdsl: --pp 2 -m 4 --memory-limit 3\n" + BODY, "units.sched", Sizes())
    assert sizes.scenarios(resolve_text(BODY, "units.sched"))[0].memory_limit == 3


def test_a_directive_gives_the_data_parallel_degree_the_check_runs_at():
    from ppdsl.analysis.check import check
    from ppdsl.language.resolve import resolve_text

    sizes, diags = sizes_for("# ppdsl: --pp 2 -m 4 --dp 2\n" + BODY, "dp.sched", Sizes())
    assert diags == [] and sizes.dp == 2
    (scenario,) = sizes.scenarios(resolve_text("# ppdsl: --pp 2 -m 4 --dp 2\n" + BODY, "dp.sched"))[:1]
    assert scenario.dp == 2 and [d.code for d in check(scenario).diagnostics][:1] == ["E092"]
