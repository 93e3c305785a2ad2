"""The command line, ``python -m tau2_retail COMMAND``: ``main`` parses and dispatches; one
module per command (``data``, ``tasks``, ``gold``, ``replay``, ``run``, ``summarize``,
``merge``, ``report``, ``export``, ``import_`` for ``import``, ``cache``) declares its options
and prints its output. The work itself is done by the layers below (data, engine, results,
tau2_format, report); nothing here is needed by the pytest plugin."""
