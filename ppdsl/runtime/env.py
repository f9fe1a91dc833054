"""The one door to paddle: import it lazily, quietly, and with a useful message when it is missing."""

from __future__ import annotations

import os
import warnings
from types import ModuleType

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError

INSTALL_HINT = "install it with `pip install 'ppdsl[paddle]'` (paddlepaddle >= 3.3; CPU wheels work)"


def import_paddle() -> ModuleType:
    """`paddle`, in static (PIR) mode, with its C++ INFO logs silenced."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import paddle
    except ImportError as err:
        raise DiagnosticError(
            [Diagnostic("E030", f"PaddlePaddle is not available ({err.name or err})", help=INSTALL_HINT)]
        ) from None
    paddle.enable_static()
    # Paddle's Python layer warns about every fed micro-batch shape and other things users cannot act on
    warnings.filterwarnings("ignore", category=UserWarning, module=r"paddle\.")
    return paddle
