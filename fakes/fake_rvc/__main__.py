"""``python -m fake_rvc`` / the ``fake-rvc`` console script (see :mod:`fake_rvc._cli`)."""

from __future__ import annotations

import sys

from fake_rvc._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
