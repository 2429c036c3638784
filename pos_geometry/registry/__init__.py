"""The model table: which models pos_geometry knows by name, and how to read them.

A model is a row (:class:`ModelSpec`) in :mod:`pos_geometry.registry.table`, not a branch
in code. Look rows up with :func:`get_spec` (name, alias or hub repo id, any case);
:func:`check_revision` validates training-checkpoint revisions against the published
schedules; :func:`kind_from_config` tells learned from rotary models for repos that are
not in the table. :data:`ATTENTION_LAYOUTS` says, per ``model_type``, where a rotary model keeps
its query/key projections and how its rotation planes pair dimensions.
"""

from pos_geometry.registry.attention import ATTENTION_LAYOUTS, AttentionLayout, attention_layout
from pos_geometry.registry.lookup import (
    all_specs,
    check_revision,
    find_spec,
    get_spec,
    kind_from_config,
    known_names,
    revisions,
    row_offset_from_config,
    suggest,
    table_records,
)
from pos_geometry.registry.schedules import CheckpointSchedule, get_schedule, schedule_names
from pos_geometry.registry.spec import ModelSpec

__all__ = [
    "ATTENTION_LAYOUTS",
    "AttentionLayout",
    "CheckpointSchedule",
    "ModelSpec",
    "all_specs",
    "attention_layout",
    "check_revision",
    "find_spec",
    "get_schedule",
    "get_spec",
    "kind_from_config",
    "known_names",
    "revisions",
    "row_offset_from_config",
    "schedule_names",
    "suggest",
    "table_records",
]
