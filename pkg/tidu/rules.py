"""The old import path of ``tidu.ad.rules``, kept for one release: ``tidu.rules`` is that module
itself (primitive authors import from ``tidu.extend``; docs/architecture.md, "Moved modules")."""

from __future__ import annotations

import sys

from tidu.ad import rules as _module

sys.modules[__name__] = _module
