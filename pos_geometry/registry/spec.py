"""The typed record behind one row of the model table.

:class:`ModelSpec` is frozen and validated on construction: a row that could not be
loaded (a learned row without a tensor key, a rotary row missing a field needed to
build its table offline, a schedule that does not exist) fails at import of the
table, not at the first download.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.schedules import SCHEDULE_DATA, CheckpointSchedule, get_schedule

__all__ = ["ModelSpec", "SpecKind", "SPEC_KINDS"]

SpecKind = Literal["learned", "rotary"]
SPEC_KINDS: tuple[str, ...] = ("learned", "rotary")


def _bad(name: str, rule: str, got: Any, fix: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"model-table row {name!r}: {rule}; got {got!r}. {fix}")


@dataclass(frozen=True)
class ModelSpec:
    """One model the package knows by name.

    Attributes:
        name: canonical short name (``"gpt2"``, ``"pythia-70m"``); lower case.
        repo_id: the Hugging Face hub repository (``"openai-community/gpt2"``).
        family: model family (``"gpt2"``, ``"stanford-crfm"``, ``"pythia"``, ``"opt"``, ...).
        kind: ``"learned"`` (a stored table is read) or ``"rotary"`` (the table is computed).
        model_type: the ``model_type`` of the repo's config.json (``"gpt2"``, ``"gpt_neox"``, ``"opt"``);
            the row offset follows from it (:data:`~pos_geometry.registry.lookup.ROW_OFFSET_BY_MODEL_TYPE`).
        aliases: other names that resolve to this row (legacy hub ids, common nicknames).
        position_key: the checkpoint key of the positional table (learned rows); preferred when the
            checkpoint holds it, otherwise the usual positional keys are searched.
        token_key: the checkpoint key of the token-embedding table, when known; preferred likewise
            by :func:`~pos_geometry.load_token_embedding`.
        n_positions: number of positions (context length) of the model.
        d_model: the model's hidden size. The learned table is ``(n_positions, d_model)``;
            a rotary table has ``rotary_dim`` columns instead (see :attr:`rotary_config`).
        row_offset: leading rows of the stored table that are not positions (OPT, RoBERTa: 2).
            The stored table has ``n_positions + row_offset`` rows.
        revisions: name of the checkpoint schedule in :mod:`~pos_geometry.registry.schedules`,
            or None when the repo publishes only its default revision.
        default_revision: the revision used when none is asked for.
        weight_files: the weight files the repo is known to ship, tried first when its table is read
            (from the HF cache or the hub); empty means "the usual names"
            (:data:`~pos_geometry.sources.sharded.WEIGHT_FILES`).
        rotary: for rotary rows, the config.json fields needed to build the table offline, as
            sorted ``(key, value)`` pairs (read them with :attr:`rotary_config`).
        notes: anything a user should know about this row.
    """

    name: str
    repo_id: str
    family: str
    kind: SpecKind
    n_positions: int
    d_model: int
    model_type: str = ""
    aliases: tuple[str, ...] = ()
    position_key: str | None = None
    token_key: str | None = None
    row_offset: int = 0
    revisions: str | None = None
    default_revision: str = "main"
    weight_files: tuple[str, ...] = ()
    rotary: tuple[tuple[str, Any], ...] = ()
    notes: str = ""

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name or name != name.strip().lower():
            raise _bad(str(name), "name must be a non-empty lower-case string", name, "Fix the row.")
        if not isinstance(self.repo_id, str) or self.repo_id.count("/") != 1:
            raise _bad(name, "repo_id must look like 'org/name'", self.repo_id, "Use the hub repository id.")
        if self.kind not in SPEC_KINDS:
            raise _bad(name, f"kind must be one of {SPEC_KINDS}", self.kind, "Fix the row.")
        for attr in ("n_positions", "d_model"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _bad(name, f"{attr} must be a positive int", value, "Fix the row.")
        if isinstance(self.row_offset, bool) or not isinstance(self.row_offset, int) or self.row_offset < 0:
            raise _bad(name, "row_offset must be an int >= 0", self.row_offset, "Fix the row.")
        if self.revisions is not None and self.revisions not in SCHEDULE_DATA:
            raise _bad(
                name,
                f"revisions must name a schedule in {sorted(SCHEDULE_DATA)} or be None",
                self.revisions,
                "Add the schedule to registry/schedules.py.",
            )
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "weight_files", tuple(self.weight_files))
        rotary = dict(self.rotary)
        object.__setattr__(self, "rotary", tuple(sorted(rotary.items())))
        if self.kind == "learned":
            if not self.position_key:
                raise _bad(name, "a learned row needs position_key", self.position_key, "Add the tensor key.")
            if rotary:
                raise _bad(name, "a learned row must not carry rotary fields", rotary, "Remove them.")
        else:
            self._check_rotary(rotary)

    def _check_rotary(self, rotary: dict[str, Any]) -> None:
        from pos_geometry.encodings.rotary import rotary_params  # torch: only when a rotary row is built

        if not rotary:
            raise _bad(self.name, "a rotary row needs its rotary config fields", rotary, "Add them.")
        params = rotary_params(rotary)  # raises when a field needed offline is missing
        if params.max_positions != self.n_positions:
            raise _bad(
                self.name,
                f"n_positions must equal the rotary max_position_embeddings ({params.max_positions})",
                self.n_positions,
                "Make them agree.",
            )
        hidden = rotary.get("hidden_size")
        if hidden is not None and hidden != self.d_model:
            raise _bad(
                self.name, f"d_model must equal the rotary hidden_size ({hidden})", self.d_model, "Fix it."
            )
        if self.row_offset:
            raise _bad(self.name, "a rotary row has no stored rows to skip", self.row_offset, "Use 0.")

    # --- derived views ------------------------------------------------------
    @property
    def stored_rows(self) -> int:
        """Rows of the stored positional tensor: ``n_positions + row_offset``."""
        return self.n_positions + self.row_offset

    @property
    def rotary_config(self) -> dict[str, Any]:
        """The rotary fields as a config.json-style dict (empty for learned rows)."""
        return dict(self.rotary)

    @property
    def schedule(self) -> CheckpointSchedule | None:
        """The checkpoint schedule of this row, or None."""
        return get_schedule(self.revisions) if self.revisions else None

    @property
    def keys(self) -> tuple[str, ...]:
        """Every string that resolves to this row: name, repo id, aliases."""
        return (self.name, self.repo_id, *self.aliases)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_record` inverts it."""
        out = dataclasses.asdict(self)
        out["aliases"] = list(self.aliases)
        out["weight_files"] = list(self.weight_files)
        out["rotary"] = self.rotary_config
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ModelSpec:
        """Build a spec from a plain dict (a table row or a JSON object); unknown fields are refused."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(record) - known
        if unknown:
            raise InvalidArgumentError(
                f"model-table row {record.get('name')!r} has unknown fields {sorted(unknown)}; "
                f"the fields are {sorted(known)}."
            )
        data = dict(record)
        data["rotary"] = tuple(dict(data.get("rotary") or {}).items())
        return cls(**data)
