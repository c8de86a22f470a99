"""The old import path of ``tidu.backends.xla``, kept for one release: ``tidu.xla`` is that
module itself (docs/architecture.md, "Moved modules")."""

from __future__ import annotations

import sys

from tidu.backends import xla as _module

sys.modules[__name__] = _module
