"""One vocabulary for the arguments every analysis shares: wherever ``progress``, ``device``, ``random_state``,
``batch_size`` or ``window`` appears in a public signature, it takes the same values (one annotation, one kind
of default), and the shared validators accept and refuse the same values for every function."""

from __future__ import annotations

import inspect
import typing

import pytest
import torch

import pos_geometry as pg
from pos_geometry import _progress, hidden, interventions, plotting, sweeps
from pos_geometry._device import resolve_device
from pos_geometry.analysis._inputs import parse_window
from pos_geometry.errors import InvalidArgumentError

PUBLIC_MODULES = (pg, plotting, interventions, hidden, sweeps)

# name -> (annotation as written, the defaults it may have)
VOCABULARY = {
    "progress": ("Progress", {None}),
    "device": ("Device", {"auto", "cpu", None}),
    "random_state": ("int", {0}),
    "batch_size": ("int | None", {None}),
    "window": ("Window", {None}),
}


def public_signatures() -> list[tuple[str, inspect.Parameter]]:
    """``(where, parameter)`` for every parameter of every public function and method (results' dataclass
    fields are outputs, not arguments, and are left out), and of the keyword options a function takes
    through ``**options: Unpack[...]``."""
    found = []
    seen = set()
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            callables = []
            if inspect.isfunction(obj):
                callables.append((name, obj))
            elif inspect.isclass(obj):
                callables += [
                    (f"{name}.{m}", f)
                    for m, f in inspect.getmembers(obj, inspect.isfunction)
                    if not m.startswith("_")
                ]
            for where, func in callables:
                if id(func) in seen:
                    continue
                seen.add(id(func))
                for parameter in inspect.signature(func).parameters.values():
                    found.append((where, parameter))
                    if parameter.kind is inspect.Parameter.VAR_KEYWORD and "Unpack[" in str(
                        parameter.annotation
                    ):
                        options = typing.get_type_hints(func, include_extras=True)[parameter.name]
                        for key, hint in typing.get_args(options)[0].__annotations__.items():
                            hint = getattr(hint, "__forward_arg__", hint)  # TypedDict fields: forward refs
                            fake = inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=hint)
                            found.append((f"{where}(**{parameter.name})", fake))
    return found


def test_every_shared_argument_has_one_annotation_and_a_default_of_its_kind():
    parameters = public_signatures()
    counts = {name: 0 for name in VOCABULARY}
    wrong = []
    for where, parameter in parameters:
        if parameter.name not in VOCABULARY:
            continue
        counts[parameter.name] += 1
        annotation, defaults = VOCABULARY[parameter.name]
        written = (
            parameter.annotation
            if isinstance(parameter.annotation, str)
            else getattr(parameter.annotation, "__name__", str(parameter.annotation))
        )
        if written not in (annotation, f"_progress.{annotation}") and not (
            parameter.name == "progress" and parameter.annotation == _progress.Progress
        ):
            wrong.append(f"{where}: {parameter.name}: {written}")
        if parameter.default is not inspect.Parameter.empty and parameter.default not in defaults:
            wrong.append(f"{where}: {parameter.name} = {parameter.default!r}")
    assert wrong == []
    # the walk reaches the functions it is meant to hold (a broken walk would pass vacuously)
    assert counts["progress"] >= 7 and counts["device"] >= 8 and counts["window"] >= 8
    assert counts["random_state"] >= 5 and counts["batch_size"] >= 3


@pytest.mark.parametrize("progress", [True, False, None, lambda done, total: None])
def test_progress_accepts_the_four_forms(progress):
    assert _progress.check_progress(progress) is progress


@pytest.mark.parametrize("progress", ["yes", 1.5, [True]])
def test_progress_refuses_anything_else_with_the_rule(progress):
    with pytest.raises(InvalidArgumentError, match="progress must be True, False, None"):
        _progress.check_progress(progress)


def test_a_callable_progress_hears_every_step_of_an_analysis_and_draws_no_bar(capsys):
    table = pg.sinusoidal(256, 16)
    heard = []
    pg.analyze(
        table,
        analyses=("periodicity",),
        n_surrogates=19,
        alpha=0.05,
        progress=lambda d, t: heard.append((d, t)),
    )
    assert heard and heard[-1][0] == heard[-1][1]  # counted up to its total
    assert [d for d, _ in heard] == sorted(d for d, _ in heard)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("device", ["auto", None, "cpu", torch.device("cpu")])
def test_device_values_mean_the_same_everywhere(device):
    assert resolve_device(device) == torch.device("cpu") or torch.cuda.is_available()
    assert pg.sinusoidal(8, 4, device=device).matrix.device.type == resolve_device(device).type


def test_window_values_mean_the_same_everywhere():
    assert parse_window(None, 10) == (0, 10)
    assert parse_window((2, None), 10) == (2, 10)
    with pytest.raises(InvalidArgumentError, match="window"):
        parse_window((0, 11), 10)
