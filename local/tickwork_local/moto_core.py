"""moto's request dispatch without a class inspection per request.

For every request moto lists the methods of the service's response class (``inspect.getmembers``) to find
the one named by the action: a sixth of a PutItem in process. A class's methods do not change while the
stack runs, so each class is inspected once.
"""

from __future__ import annotations

import functools
from typing import Any

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from moto.core import responses

    module: Any = responses
    module.method_names_from_class = functools.lru_cache(maxsize=256)(module.method_names_from_class)
