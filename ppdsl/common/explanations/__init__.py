"""The long form of every diagnostic code: what it means, a wrong example and the fixed one (`ppdsl explain CODE`).

One file per code, named by it (`E001.py`, `S105.py`), each defining `EXPLANATION`; this index loads them in
code order. What an explanation and an example are is `example.py`; texts several examples share are
`shared_texts.py`.

Kept apart from `codes.py`, which every command imports for exit statuses, because only `explain`, the docs and
the tests read these texts. An example is a command line and the files it reads; for a code a `.sched` file can
produce, the file is `example.sched` and the command `ppdsl check` with the sizes. tests/common/test_codes.py runs
every example that needs no PaddlePaddle and checks that the wrong one reports its code and the fixed one does
not.
"""

from __future__ import annotations

import importlib
import importlib.resources
import re

from ppdsl.common.explanations.example import Example, Explanation

CODE_FILE = re.compile(r"([ES]\d{3})\.py")  # a code's file: its name is the code


def _load() -> dict[str, Explanation]:
    """Every code's explanation, in code order, from the files of this package (wherever it is installed)."""
    names = (CODE_FILE.fullmatch(entry.name) for entry in importlib.resources.files(__name__).iterdir())
    codes = sorted(match.group(1) for match in names if match)
    return {code: importlib.import_module(f"{__name__}.{code}").EXPLANATION for code in codes}


EXPLANATIONS: dict[str, Explanation] = _load()

__all__ = ["EXPLANATIONS", "Example", "Explanation"]
