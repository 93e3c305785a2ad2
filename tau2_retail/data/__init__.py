"""The pinned upstream data: manifest and fetch (``files``), the tasks, the seed database and
the gold replay (expected database + reference actions per task)."""
