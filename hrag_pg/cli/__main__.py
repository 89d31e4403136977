"""``python -m hrag_pg.cli``: the ``hrag`` command."""

from . import main

main()
