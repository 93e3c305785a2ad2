"""The self-contained HTML run report and the comparison of two runs, built from a run
directory's artifacts (``python -m tau2_retail report`` prints; this package only builds)."""
