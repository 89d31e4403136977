"""``python -m hrag_pg.cli``: the command moved to ``python -m hrag_pg``; say so in one line.

The program (the command line and ``hrag serve``) is assembled in
:mod:`hrag_pg.main`, above both; running this package alone would lack ``serve``.
"""

import sys

sys.exit("error: the hrag command is `python -m hrag_pg` (or `hrag`); `python -m hrag_pg.cli` was replaced by it")
