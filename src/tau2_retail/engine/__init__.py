"""One scenario end to end: the prompts, the conversation loop, the judge, the signals and
the metrics record (``scenario``), and ``harness``: the one way to build and run a scenario
from the data bundle, the three role models and the limits, used by the pytest fixture and by
``python -m tau2_retail run``. Nothing here knows about pytest or writes files."""
