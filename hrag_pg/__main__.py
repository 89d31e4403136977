"""``python -m hrag_pg``: the ``hrag`` command."""

from .main import main

main()
