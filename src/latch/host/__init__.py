"""The host: the one room where the store, the kernel, engines, estimators, plugins and config meet.

* :mod:`latch.host.session`: the store seen as one session through the port
  (:class:`StoreSessionReader`, :class:`StoreKernelWriter`), so ``latch.engine`` never imports the
  store or the kernel;
* :mod:`latch.host.ingest`: :func:`import_file`, appending a parsed transcript to the store, so
  ``latch.importers`` stays parse-only.
"""

from __future__ import annotations
