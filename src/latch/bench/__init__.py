"""Workflows Latch's users run at volume: the stress runner and the engine benchmark.

* :mod:`latch.bench.scenario`: the scenario shape measured on real transcripts
  (:data:`~latch.bench.scenario.CORPUS_SHAPE`) and the seeded generator of realistic sessions;
* :mod:`latch.bench.stress`: ``latch stress`` (spec: "Stress guarantees");
* ``latch bench`` (every engine over every session under every budget): :mod:`latch.bench.runner` plans and runs
  the jobs (:mod:`latch.bench.needles`, :mod:`latch.bench.coverage` probe each view);
  :mod:`latch.bench.summary` sums them per engine and budget; :mod:`latch.bench.report` writes the tables and
  verdicts, :mod:`latch.bench.plots` the plots;
* :mod:`latch.bench.shards`: ``latch stress --shards`` (one stress run split into independent shards);
* :mod:`latch.bench.executor`: what the last two share: tasks in fresh processes, locally or on a Dask cluster.
"""
