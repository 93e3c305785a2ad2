"""Root conftest: it only lists the plugins (see plugins/ for the pytest glue)."""

pytest_plugins = ["plugins.tau2_plugin"]
