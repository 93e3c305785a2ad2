"""Root conftest of the checkout: the pytest plugin itself is registered by the installed
distribution's ``pytest11`` entry point (``pip install -e .``), so its options exist whatever the
rootdir. ``pytester`` serves the suite's own plugin tests (tests/plugins); pytest accepts
``pytest_plugins`` only in this top-level conftest.
"""

pytest_plugins = ["pytester"]
