"""``python -m tau2_retail``: the command line (works without pytest)."""

from __future__ import annotations

import sys

from tau2_retail.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
