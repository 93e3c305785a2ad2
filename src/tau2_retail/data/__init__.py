"""The pinned upstream data: manifest and digests (``files``), the fetch (``fetch``), the tasks,
the seed database and the gold replay (expected database + reference actions per task). Pure
functions: the ``data``, ``tasks`` and ``gold`` commands in ``cli`` print their results."""
