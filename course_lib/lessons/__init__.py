"""What the lesson notebooks read and show from the records: tables, charts and cost models, one
module per chapter that needs more than a cell's worth (``ch06``, ``ch07``, ``ch09``, ``ch10``). Beside
``widgets``: a task module holds what grading needs, and these hold what a notebook shows."""
