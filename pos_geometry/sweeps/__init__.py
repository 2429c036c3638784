"""Training-checkpoint sweeps: the positional table (or a rotary model's q/k weights) of every checkpoint,
read by range requests, analysed concurrently (locally or on Dask), stored resumably, and written as a tidy
table.

::

    sweep(model, revisions)        pos_geometry.sweeps.run
      select_revisions             .revisions   "all" | "every:N" | "log:N" | [names or steps]
      run_checkpoint               .task        range reads (sources.hub) + analyses (.metrics), or for a
                                                rotary model its q/k weights + frequency atlas (.rotary)
      run_tasks                    .executors   local threads | Dask distributed
      SweepStore                   .store       one atomic file per finished checkpoint
      SweepResult                  .result      records, drift, CSV / Parquet / JSON
"""

from pos_geometry.sweeps.metrics import ANALYSES, CHEAP, SweepConfig
from pos_geometry.sweeps.record import CheckpointRecord
from pos_geometry.sweeps.result import SweepResult
from pos_geometry.sweeps.revisions import select_revisions
from pos_geometry.sweeps.rotary import ROTARY_ANALYSES
from pos_geometry.sweeps.run import sweep

__all__ = [
    "ANALYSES",
    "CHEAP",
    "ROTARY_ANALYSES",
    "CheckpointRecord",
    "SweepConfig",
    "SweepResult",
    "select_revisions",
    "sweep",
]
