"""The operations every front end translates: the CLI, the HTTP server, MCP, the adapters, the facade.

An operation checks its arguments once, raises the project's typed errors,
and answers in one shape (:mod:`.shapes`); a front end only turns its input
into the arguments, and the shape or the error into its own output.

* :mod:`.reading` — :class:`~.reading.Reader` runs the operations in-process,
  :class:`~.reading.AsyncReader` on an event loop (the server);
* :mod:`.remote` — :class:`~.remote.RemoteReader`, the same interface through
  a running ``hrag serve`` (the CLI with ``HRAG_SERVER_URL``): it imports
  neither the facade nor the model, so a question costs a process start and
  one HTTP round trip.

(Nothing is imported here, so that the remote reader stays that light.)
"""
