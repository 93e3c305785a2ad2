"""The pytest plugin (registered by the ``pytest11`` entry point): the ``--tau2-*`` options and
``tau2_*`` ini keys, scenario parametrization, the ``tau2_*`` fixtures (which run scenarios
through ``tau2_retail.engine.harness``), the run's lifecycle, summaries and the CI gate."""
