"""Root conftest: it only lists the plugins (see plugins/ for the pytest glue).

``pytester`` serves the suite's own plugin tests (tests/plugins); pytest accepts
``pytest_plugins`` only in this top-level conftest.
"""

pytest_plugins = ["plugins.tau2_plugin", "pytester"]
