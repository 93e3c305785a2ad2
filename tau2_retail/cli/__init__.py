"""The command line, ``python -m tau2_retail <command>``: argument parsing only, one module per
command; the work is done by the engine packages."""
