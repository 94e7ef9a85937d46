"""Name -> mechanism class, for the built-in mechanisms and for plugins.

A mechanism module decorates its class with ``@register``. The built-in modules of this package are imported by
``mechanisms/__init__.py`` (every module of the package, so adding one touches nothing else). A mechanism defined
outside the package is a *plugin*: a module that registers its classes when imported, loaded by

* ``load_plugins(["my_pkg.my_mech"])`` (what ``plugins = [...]`` in a config and ``--plugin`` on the command
  line do): a dotted module name, importable from ``sys.path`` or the current folder, or the path of a ``.py``
  file (imported as a module named after the file), or
* the entry-point group ``auditkit.mechanisms`` of an installed package (``[project.entry-points.
  "auditkit.mechanisms"] my_mech = "my_pkg.my_mech"``), loaded the first time the registry is read.

A plugin that fails to import, registers no mechanism, registers a name already taken, or declares a parameter
whose default fails its own check raises ``PluginError`` naming the plugin, and registers nothing.

A plugin's code keeps running after its import: ``register`` guards the methods of a class a plugin registers
(``GUARDED_METHODS``: its constructor, encode, decode, claim and capabilities, and the callables its capabilities
return), so that an exception raised inside them, or a value of the wrong type returned (``encode`` must return
its ``message_type``), arrives as ``PluginCodeError``, one line naming the plugin, the method and the exception.
Built-in mechanisms are not guarded: their bugs are the toolkit's, and keep their tracebacks.

Each such call is also bounded in time (``set_plugin_timeout``, the command line's ``--plugin-timeout``; default
``DEFAULT_PLUGIN_TIMEOUT``, 600 s per call): a plugin stuck in a loop stops the command with one line
(``PluginCodeError``: "... encode() did not return within 600 s ...") instead of hanging it. The bound is a
``signal.setitimer`` alarm, so it applies in the main thread of a platform with SIGALRM (not Windows), and is left
out elsewhere, inside a call already bounded, or while the program has its own ITIMER_REAL alarm set; a call stuck
inside one long C function (a torch operation) is stopped when it returns to Python.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import numbers
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import dp_accounting
import torch

from auditkit.mechanisms.base import Mechanism, Param
from auditkit.mechanisms.capabilities import (
    CAPABILITIES,
    AuditSetting,
    BatchSampling,
    SideValues,
    Tiling,
)
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.message import Message
from auditkit.mechanisms.tradeoff import TradeOff

__all__ = [
    "capability",
    "declared",
    "ENTRY_POINT_GROUP",
    "GUARDED_METHODS",
    "MechanismInfo",
    "PluginCodeError",
    "PluginError",
    "DEFAULT_PLUGIN_TIMEOUT",
    "calibrate",
    "check_input",
    "create",
    "describe",
    "load_entry_points",
    "load_plugins",
    "mechanism_class",
    "names",
    "origin",
    "preflight",
    "reference_update",
    "register",
    "registered_classes",
    "renamed_param",
    "plugin_timeout",
    "set_plugin_timeout",
]

ENTRY_POINT_GROUP = "auditkit.mechanisms"
_FORMER_PACKAGES = ("mechanisms", "attacks", "reports")  # top-level packages before the one auditkit namespace
_BUILT_IN = __name__.rpartition(".")[0] + "."  # "auditkit.mechanisms.": the modules of the built-in mechanisms

RENAMED_PARAMS: dict[str, dict[str, str]] = {
    "dpsq": {"bound": "support"},
    "laplace-sq": {"bound": "support"},
    "mspdq": {"w_max": "support", "split": "compat"},
    "msp": {"split": "compat"},
    "jopeq-exact": {"target": "noise"},
}
"""Built-in parameters renamed (issue 28: one word per meaning, ``docs/names.md``): mechanism -> {old: new}. The
old name is refused with the new one named (``renamed_param``), in ``create`` and in config files."""

_REGISTRY: dict[str, type[Mechanism]] = {}
_ORIGIN: dict[str, str] = {}  # mechanism name -> the plugin (module or entry point) that registered it
_loading: list[str] = []  # the plugin being imported, while it is
_entry_points_loaded = False

M = TypeVar("M", bound=type[Mechanism])


class PluginError(ValueError):
    """A plugin could not be loaded; the message names the plugin and says why, in one line."""


class PluginCodeError(Exception):
    """A plugin's mechanism failed at run time: one of its guarded methods (``GUARDED_METHODS``) raised, or returned
    a value of the wrong type. The message is one line naming the plugin, the mechanism's method and what went
    wrong, e.g. "plugin my_mech.py: m1.guarantee() raised RuntimeError: boom"; the exception raised inside the
    plugin is its ``__cause__``.

    Deliberately not a ``ValueError``: the toolkit reads a ``ValueError`` as input it refuses (and sometimes
    recovers from one, e.g. by stopping a sweep), and a plugin's bug must stop the command instead.
    """


GUARDED_METHODS = ("__init__", "encode", "decode", "guarantee", "clip_update", *CAPABILITIES)
"""The methods of a plugin's mechanism whose exceptions become ``PluginCodeError``. ``__init__`` lets a
``ValueError`` through: that is how a mechanism refuses its parameters, and it is reported as such."""


DEFAULT_PLUGIN_TIMEOUT = 600.0
"""Seconds one call into a plugin's mechanism code may run (``set_plugin_timeout``): far above any sane encode, and
a hang still ends."""
_plugin_timeout: float | None = DEFAULT_PLUGIN_TIMEOUT
_timing = False  # a bounded call is running: the calls it makes run under its alarm
_HAS_ALARM = hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")
_REPEAT = 1.0  # seconds between further alarms, should the plugin's code catch the first one (a bare except)
try:  # signal.getsignal converts to an enum, which takes 4 us for a function handler; the C function is the same
    from _signal import getsignal as _getsignal
except ImportError:  # not CPython
    _getsignal = signal.getsignal


def set_plugin_timeout(seconds: float | None) -> float | None:
    """Bound each later call into a plugin's mechanism code to ``seconds`` (0 or None: no bound); returns the bound
    before. ``ValueError`` for a negative or non-finite number."""
    global _plugin_timeout
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
                                or not math.isfinite(seconds) or seconds < 0):
        raise ValueError(f"the plugin timeout must be a finite number of seconds >= 0 (0: no bound), got {seconds!r}")
    previous, _plugin_timeout = _plugin_timeout, (float(seconds) or None) if seconds is not None else None
    return previous


def plugin_timeout() -> float | None:
    """The bound on one call into a plugin's mechanism code, in seconds (None: none)."""
    return _plugin_timeout


class _PluginTimeout(BaseException):
    """Raised by the alarm inside a plugin's call; a BaseException, so that the plugin's ``except Exception`` lets it
    through."""


def _on_alarm(signum: int, frame: Any) -> None:
    if _timing:  # an alarm after the call returned (a race of microseconds) is dropped
        raise _PluginTimeout


def _bounded(late: Callable[[float], str], function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` within the plugin timeout, else ``PluginCodeError(late(seconds))``; unbounded
    where the alarm cannot be used or is not ours to take (module docstring). The handler stays installed between
    calls where SIGALRM had none (installing one costs more than the rest of the bound); a program's own handler is
    put back after each call."""
    global _timing
    seconds = _plugin_timeout
    if (seconds is None or _timing or not _HAS_ALARM or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        return function(*args, **kwargs)
    previous = _getsignal(signal.SIGALRM)
    if previous is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    _timing = True
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds, _REPEAT)
        try:
            return function(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _PluginTimeout:
        raise PluginCodeError(late(seconds)) from None
    finally:
        _timing = False
        if previous not in (_on_alarm, signal.SIG_DFL, None):
            signal.signal(signal.SIGALRM, previous)


def _late(seconds: float) -> str:
    return f"did not return within {seconds:g} s (raise --plugin-timeout; 0 lifts the bound)"


@dataclass(frozen=True)
class MechanismInfo:
    """What the CLI lists about a mechanism.

    name:      registry name.
    summary:   one line.
    params:    the parameter specs (name, type, default, help, allowed, choices).
    guarantee: ``PrivacyGuarantee.summary()`` of the default configuration.
    bits_per_coordinate: measured size of the default configuration's message for the
               ``reference_update()`` (float32 = 32).
    origin:    "built-in", or the plugin that registered it.
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    guarantee: str
    bits_per_coordinate: float
    origin: str = "built-in"


def register(cls: M) -> M:
    """Class decorator adding a ``Mechanism`` subclass under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
        raise TypeError(f"register takes a Mechanism subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"mechanism class {cls.__qualname__} must set a non-empty string `name`")
    if name in _REGISTRY:
        taken = _REGISTRY[name]
        raise ValueError(
            f"mechanism {name!r} is already registered by {taken.__module__}.{taken.__qualname__} "
            f"({origin(name)}); choose another name"
        )
    names_seen: set[str] = set()
    for p in cls.params_spec:  # a default that fails its own constraint is a bug in the mechanism
        if not (p.name.isidentifier() and p.name != "private_seed" and p.name not in names_seen):
            raise ValueError(f"mechanism {name!r}: parameter name {p.name!r} must be a Python identifier, unique, "
                             "and not private_seed")
        names_seen.add(p.name)
        try:
            p.validate(p.default)
        except ValueError as err:
            raise ValueError(f"mechanism {name!r}: the default of parameter {p.name!r} fails its own check: {err}")
    message_type = getattr(cls, "message_type", None)
    if not (isinstance(message_type, type) and issubclass(message_type, Message)):
        raise ValueError(f"mechanism {name!r} must set message_type to the mechanisms.Message subclass its encode "
                         f"returns, got {message_type!r}")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise ValueError(f"mechanism {name!r} does not implement {', '.join(missing)}")
    _REGISTRY[name] = cls
    if _loading:
        _ORIGIN[name] = _loading[-1]
        _guard_plugin_class(cls, _loading[-1])
    return cls


def _guard_plugin_class(cls: type[Mechanism], label: str) -> None:
    """Guard each of ``GUARDED_METHODS`` that the plugin's class defines or inherits from code other than
    ``Mechanism``'s generic defaults: in place in the class that defines it (so ``declared`` reads the class
    dictionaries as before), or, for a method inherited from a toolkit class, in ``cls`` itself -- except a
    capability, which ``cls`` would then seem to declare."""
    for method in GUARDED_METHODS:
        owner = next(c for c in cls.__mro__ if method in c.__dict__)
        function = owner.__dict__[method]
        if owner in (Mechanism, object) or not inspect.isfunction(function) or getattr(function, "_guarded", False):
            continue
        if not owner.__module__.startswith(_BUILT_IN):
            setattr(owner, method, _guarded(method, function, label))
        elif method not in CAPABILITIES:
            setattr(cls, method, _guarded(method, function, label))


def _guarded(method: str, function: Callable[..., Any], label: str) -> Callable[..., Any]:
    """``function`` (a plugin mechanism's ``method``) raising ``PluginCodeError`` for an exception raised inside it
    or a result of the wrong type (``_wrong_result``); the callables a capability returns are guarded too."""

    @functools.wraps(function)
    def guarded(self: Mechanism, *args: Any, **kwargs: Any) -> Any:
        try:
            result = _bounded(lambda seconds: _failure(self, label, f"{method}()", _late(seconds)),
                              function, self, *args, **kwargs)
        except PluginCodeError:
            raise  # raised by a guarded method this one called (or the time bound): it names the right method
        except Exception as err:  # noqa: BLE001 -- any failure of a plugin's code is reported as the plugin's
            if method == "__init__" and isinstance(err, ValueError):
                raise  # the mechanism refusing its parameters, reported as such (GUARDED_METHODS)
            raise PluginCodeError(_failure(self, label, f"{method}()", f"raised {_exception(err)}")) from err
        wrong = _wrong_result(self, method, result)
        if wrong is not None:
            raise PluginCodeError(_failure(self, label, f"{method}()", wrong))
        return _guard_returned(self, label, method, result)

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


def _failure(mechanism: Mechanism, label: str, what: str, how: str) -> str:
    """"plugin LABEL: NAME.WHAT HOW", naming the plugin that registered the mechanism's class (a subclass that a
    plugin registered under another name is its own plugin's)."""
    name = type(mechanism).name
    return f"plugin {_ORIGIN.get(name, label)!r}: {name}.{what} {how}"


def _exception(err: BaseException) -> str:
    """"TypeName: first line of the message" (the type alone when the message is empty)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _type_name(value: Any) -> str:
    """How a wrong result's type is named: "torch.Tensor", "numpy.ndarray", "dict", "None", "FloatMessage"."""
    kind = type(value)
    if value is None or kind.__module__ == "builtins" or issubclass(kind, Message):
        return "None" if value is None else kind.__qualname__
    return f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"


# What a guarded method must return (the capabilities may also return None): the type and its name in messages.
_RESULTS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "decode": (torch.Tensor, "a torch.Tensor"),
    "guarantee": (PrivacyGuarantee, "a PrivacyGuarantee"),
    "tiling": (Tiling, "a Tiling or None"),
    "batch_sampling": (BatchSampling, "a BatchSampling or None"),
    "side_values": (SideValues, "a SideValues or None"),
    "audit_setting": (AuditSetting, "an AuditSetting or None"),
    "dp_event": (dp_accounting.DpEvent, "a dp_accounting.DpEvent"),
    "true_epsilon": (numbers.Real, "a number or None"),
    "tradeoff": (TradeOff, "a trade-off curve (auditkit.mechanisms.tradeoff) or None"),
}


def _wrong_result(mechanism: Mechanism, method: str, result: Any) -> str | None:
    """What is wrong with ``result`` as ``method``'s return value ("returned torch.Tensor, not its message_type
    FloatMessage"), or None when it has the right type."""
    if method == "encode":
        expected = type(mechanism).message_type
        ok = isinstance(result, expected)
        return None if ok else f"returned {_type_name(result)}, not its message_type {expected.__name__}"
    if method == "output_log_density":
        ok = result is None or callable(result)
        return None if ok else f"returned {_type_name(result)}, not a function f(y, x), an OutputDensity or None"
    if method not in _RESULTS:
        return None
    expected, named = _RESULTS[method]
    optional = method in CAPABILITIES and method != "dp_event"
    ok = (result is None and optional) or (isinstance(result, expected) and not isinstance(result, bool))
    return None if ok else f"returned {_type_name(result)}, not {named}"


def _guard_returned(mechanism: Mechanism, label: str, method: str, result: Any) -> Any:
    """A capability's result with the plugin's callables inside it guarded (``Tiling.for_copies``, the samplers of
    ``BatchSampling`` and ``SideValues``, a log density given as a plain function); anything else unchanged."""
    fields = {Tiling: "for_copies", BatchSampling: "sample", SideValues: "sample"}
    field = fields.get(type(result))
    if field is not None and getattr(result, field) is not None:
        call = _guarded_call(mechanism, label, f"{method}().{field}", getattr(result, field))
        return dataclasses.replace(result, **{field: call})
    if method == "output_log_density" and inspect.isfunction(result):
        return _guarded_call(mechanism, label, f"{method}()'s function", result)
    return result


def _guarded_call(mechanism: Mechanism, label: str, what: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (returned by a plugin's capability) raising ``PluginCodeError`` for an exception inside it."""

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return _bounded(lambda seconds: _failure(mechanism, label, what, _late(seconds)), function, *args, **kwargs)
        except PluginCodeError:
            raise
        except Exception as err:  # noqa: BLE001 -- a plugin's code
            raise PluginCodeError(_failure(mechanism, label, what, f"raised {_exception(err)}")) from err

    return guarded


def preflight(mechanism: Mechanism) -> None:
    """A plugin's mechanism run once through everything a command calls first: its claim, every capability it
    declares, and one encode and decode (of ``check_input``: ``PREFLIGHT_DIMENSION`` coordinates), so that a bug
    there (an exception, or ``encode`` not returning its ``message_type``) stops the command (``PluginCodeError``, one line) before it starts work or
    writes anything, rather than hours into an audit. Nothing for a built-in mechanism."""
    if origin(mechanism.name) == "built-in":
        return
    mechanism.guarantee()
    for name in CAPABILITIES:
        if declared(mechanism, name):
            capability(mechanism, name)
    seed = REFERENCE_SEED
    mechanism.decode(mechanism.encode(check_input(mechanism), seed), seed)


PREFLIGHT_DIMENSION = 16
"""Coordinates of the update ``preflight`` and ``auditkit.mechanisms.randomness.reproducible`` encode."""


def check_input(mechanism: Mechanism, dimension: int = PREFLIGHT_DIMENSION) -> torch.Tensor:
    """The update ``preflight`` and ``reproducible`` encode: the reference update's direction in ``dimension``
    coordinates, at l2 norm half the mechanism's ``clip`` (0.5 without a positive one)."""
    clip = mechanism.params.get("clip")
    scale = 0.5 * clip if isinstance(clip, float) and clip > 0 else 0.5
    return reference_update(dimension) * scale


def load_plugins(modules: list[str] | tuple[str, ...]) -> list[str]:
    """Import each plugin module (a dotted name) once; returns the mechanism names they registered.

    ``PluginError`` (one line, naming the plugin) if a module fails to import or registers badly; what the failed
    plugin had registered is removed again.
    """
    added: list[str] = []
    for module in modules:
        if not isinstance(module, str) or not module.strip():
            raise PluginError(f"plugin must be a module name such as 'my_pkg.my_mech' or a .py file, got {module!r}")
        module = module.strip()
        if module.endswith(".py"):
            path = Path(module)
            if not path.is_file():
                raise PluginError(f"plugin {module!r} failed to load: no such file")
            added += _import_plugin(module, path.stem, path=path)
        else:
            added += _import_plugin(module, module)
    return added


def _import_plugin(label: str, module: str, attribute: str | None = None, path: Path | None = None) -> list[str]:
    if module in sys.modules and attribute is None:  # imported before: by this label, another, or as a library
        loaded = [n for n, o in _ORIGIN.items() if o == label]
        if not loaded and not _registers(module):
            raise PluginError(_registered_nothing(label))
        return loaded
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # as `python -m` would: a plugin module in the current folder imports
    before = set(_REGISTRY)
    _loading.append(label)
    try:
        if path is not None:
            spec = importlib.util.spec_from_file_location(module, path)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module] = loaded
            spec.loader.exec_module(loaded)
        else:
            loaded = importlib.import_module(module)
        if attribute is not None:
            getattr(loaded, attribute)
        if not set(_REGISTRY) - before and not _registers(module):  # (an entry point's module may be imported)
            raise _RegisteredNothing()
    except _RegisteredNothing:
        sys.modules.pop(module, None)
        raise PluginError(_registered_nothing(label)) from None
    except Exception as err:  # noqa: BLE001 -- any failure of foreign code is reported as the plugin's
        for name in set(_REGISTRY) - before:
            del _REGISTRY[name]
            _ORIGIN.pop(name, None)
        sys.modules.pop(module, None)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        if isinstance(err, ModuleNotFoundError) and err.name in _FORMER_PACKAGES:  # written for auditkit < 0.3
            reason += f" (it is auditkit.{err.name} now: write `from auditkit import {err.name}`)"
        raise PluginError(f"plugin {label!r} failed to load: {reason}") from None
    finally:
        _loading.pop()
    return sorted(set(_REGISTRY) - before)


class _RegisteredNothing(Exception):
    """A plugin module imported cleanly and registered no mechanism (``_import_plugin`` reports it)."""


def _registered_nothing(label: str) -> str:
    return f"plugin {label!r} registered no mechanism (decorate its class with @mechanisms.register)"


def _registers(module: str) -> bool:
    """Whether a registered mechanism class is defined in ``module``."""
    return any(cls.__module__ == module for cls in _REGISTRY.values())


def load_entry_points() -> list[str]:
    """Load every installed plugin of the entry-point group ``auditkit.mechanisms`` (once per process)."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    _entry_points_loaded = True
    added: list[str] = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        label = f"entry point {entry.name} = {entry.value}"
        added += _import_plugin(label, entry.module, entry.attr)
    return added


def origin(name: str) -> str:
    """"built-in", or the plugin (module name, or "entry point NAME = VALUE") that registered ``name``."""
    return _ORIGIN.get(name, "built-in")


def declared(mechanism: Mechanism, capability: str) -> bool:
    """Whether ``mechanism`` declares ``capability``: its class or a private base defines it, not ``Mechanism``'s
    generic default and not another registered mechanism it subclasses (module docstring)."""
    if capability not in CAPABILITIES:
        raise ValueError(f"capability must be one of {', '.join(CAPABILITIES)}, got {capability!r}")
    mro = type(mechanism).__mro__
    owner = next(cls for cls in mro if capability in cls.__dict__)
    if owner is Mechanism:
        return False
    others = registered_classes() - {type(mechanism)}
    return not any(cls in others for cls in mro[1 : mro.index(owner) + 1])


def capability(mechanism: Mechanism, name: str) -> Any:
    """What ``mechanism`` declares for capability ``name`` (calling its method), or the generic default when it
    declares nothing (``declared``)."""
    method = getattr(type(mechanism) if declared(mechanism, name) else Mechanism, name)
    return method(mechanism)


def registered_classes() -> set[type[Mechanism]]:
    """Every registered mechanism class."""
    return set(_REGISTRY.values())


def names() -> list[str]:
    """Sorted names of all registered mechanisms (installed plugins included)."""
    load_entry_points()
    return sorted(_REGISTRY)


def _lookup(name: str) -> type[Mechanism]:
    load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; valid: {', '.join(names())}") from None


def renamed_param(name: str, param: str) -> str | None:
    """The new name of mechanism ``name``'s parameter ``param`` when it was renamed (``RENAMED_PARAMS``), else None."""
    return RENAMED_PARAMS.get(name, {}).get(param)


def create(name: str, **params: Any) -> Mechanism:
    """Instantiate mechanism ``name``; ``ValueError`` on an unknown name, parameter or invalid value (a renamed
    parameter's old name: "parameter 'bound' of mechanism 'dpsq' was renamed to 'support'")."""
    cls = _lookup(name)
    for param in params:
        new = renamed_param(name, param)
        if new is not None:
            raise ValueError(f"parameter {param!r} of mechanism {name!r} was renamed to {new!r}")
    return cls(**params)


def calibrate(name: str, target_eps: float, **params: Any) -> dict[str, Any]:
    """``params`` with mechanism ``name``'s ``noise_param`` set so that its one-round claim is ``target_eps``
    (to relative precision 1e-9): the claim's epsilon decreases in the noise, so the root is bracketed over
    [1e-9, 1e9] and found by Brent's method on log epsilon. ``ValueError`` naming the parameter when the
    mechanism has no noise parameter, when ``params`` also sets it, or when the target is out of reach."""
    import math

    from scipy.optimize import brentq

    cls = _lookup(name)
    noise = cls.noise_param
    if noise is None:
        raise ValueError(f"target_eps: mechanism {name!r} declares no noise parameter to calibrate; "
                         "give its noise directly")
    if noise in params:
        raise ValueError(f"target_eps: give either target_eps or {noise} for {name!r}, not both")
    if isinstance(target_eps, bool) or not isinstance(target_eps, (int, float)) or not (
            math.isfinite(target_eps) and target_eps > 0):
        raise ValueError(f"target_eps must be a finite number > 0, got {target_eps!r}")

    def gap(log_noise: float) -> float:
        claimed = cls(**{**params, noise: math.exp(log_noise)}).guarantee().epsilon
        return math.log(max(claimed, 1e-300)) - math.log(target_eps)  # eps 0 at huge noise

    low, high = math.log(1e-9), math.log(1e9)
    if gap(low) < 0 or gap(high) > 0:
        raise ValueError(f"target_eps {target_eps:g} is out of reach of {name!r} with {noise} in [1e-9, 1e9]")
    return {**params, noise: math.exp(brentq(gap, low, high, xtol=1e-12, rtol=1e-10))}


def at_epsilon(mechanism: Mechanism, eps: float) -> Mechanism:
    """A copy of ``mechanism`` (same class, parameters and ``private_seed``) whose one-round claim is ``eps``: its
    ``noise_param`` calibrated (``calibrate``), or else its ``eps`` parameter set. ``ValueError`` when it has
    neither, or refuses the setting (e.g. JoPEQ at an eps whose noise would be smaller than its quantizer's)."""
    import math

    noise = type(mechanism).noise_param
    if noise is not None:
        fixed = {k: v for k, v in mechanism.params.items() if k != noise}
        recalibrated = mechanism.with_params(**calibrate(mechanism.name, eps, **fixed))
    elif "eps" in mechanism.params:
        recalibrated = mechanism.with_params(eps=float(eps))
    else:
        raise ValueError(f"mechanism {mechanism.name!r} has neither a noise parameter nor an eps parameter to set "
                         "its claim by")
    claimed = recalibrated.guarantee().epsilon
    if claimed is None or not math.isclose(claimed, eps, rel_tol=1e-6):
        raise ValueError(f"mechanism {mechanism.name!r} claims {claimed!r} when set to eps {eps:g}")
    return recalibrated


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name`` (``ValueError`` naming the valid names if none)."""
    return _lookup(name)


REFERENCE_DIMENSION = 10_000
REFERENCE_SEED = 12345


def reference_update(dimension: int = REFERENCE_DIMENSION) -> torch.Tensor:
    """The fixed update that rates are quoted for: iid Gaussian coordinates scaled to l2 norm 1
    (the default clip of the clipping mechanisms), drawn from a fixed seed."""
    x = torch.randn(dimension, generator=torch.Generator().manual_seed(REFERENCE_SEED), dtype=torch.float64)
    return (x / x.norm()).to(torch.float32)


def describe(name: str) -> MechanismInfo:
    """Name, summary, parameters, default-configuration guarantee and rate of mechanism ``name``."""
    cls = _lookup(name)
    mechanism = cls(private_seed=0)
    x = reference_update()
    bits = mechanism.encode(x, REFERENCE_SEED).num_bits / x.numel()
    return MechanismInfo(cls.name, cls.summary, cls.params_spec, mechanism.guarantee().summary(), bits, origin(name))
