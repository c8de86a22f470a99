"""The old import path of ``tidu.backends.pictures``, kept for one release: ``tidu.pictures`` is
that
module itself (docs/architecture.md, "Moved modules")."""

from __future__ import annotations

import sys

from tidu.backends import pictures as _module

sys.modules[__name__] = _module
