"""The pinned upstream data: manifest and fetch (``files``), the tasks, the seed database and
the gold replay (expected database + reference actions per task). Pure functions: the
``data``, ``tasks`` and ``gold`` commands in ``cli`` print their results."""
