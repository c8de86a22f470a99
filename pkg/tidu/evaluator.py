"""The old import path of ``tidu.backends.interpreter``, kept for one release: ``tidu.evaluator``
is that
module itself (docs/architecture.md, "Moved modules")."""

from __future__ import annotations

import sys

from tidu.backends import interpreter as _module

sys.modules[__name__] = _module
