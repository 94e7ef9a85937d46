"""Typed audit configuration, loaded from TOML (or a preset) and validated in one place.

A config file has a top-level ``seed``/``device``/``title`` and these tables::

    seed = 0
    device = "auto"          # auto | cpu | cuda | cuda:N
    plugins = ["my_pkg.my_mech"]   # modules that register mechanisms of one's own (plugins)

    [data]
    dataset = "mnist-5k"     # mnist-5k (embedded, the default) | digits (embedded) | mnist | fashion-mnist | svhn | cifar10 | cifar100 | imagefolder | my_data.py:make_data
    partition = "iid"        # iid | dirichlet | shards

    [training]
    model = "cnn"            # a seed model | torchvision:resnet18 | my_models.py:make_net (docs/guide/models.md)
    small_stem = false       # the ResNet family's 3x3 stride-1 stem for 32x32 inputs
    norm = "batch"           # batch | group (GroupNorm for every BatchNorm, as DP-SGD needs)
    clients = 10
    rounds = 60
    tau = 15
    backend = "builtin"      # builtin | flower (Flower's Simulation Engine, pip install 'auditkit[flower]')

    [mechanism]              # one mechanism: any registered name, its parameters beside it
    name = "none"

    [[mechanisms]]           # ... or several settings audited side by side (not both forms)
    name = "gaussian"
    label = "Gaussian"       # optional display name
    clip = 1.0
    sweep = { sigma = [0.5, 1, 2] }   # a grid over parameters: one setting per combination

    [flower]                 # with [training] backend = "flower": Flower's Simulation Engine on Ray
    num_cpus = 1             # Ray resources per client
    ray_address = "10.0.0.2:6379"  # an existing Ray cluster (unset: Ray on this machine)

    [accounting]             # how each claim is composed over the rounds run
    composition_delta = 1e-5
    accountant = "opacus-prv"

    [dp_sgd]                 # example-level DP-SGD inside the clients' local training (absent: off)
    noise_multiplier = 1.1
    max_grad_norm = 1.0

    [inversion]              # gradient inversion of the recorded server view (audit only)
    [distinguish]            # empirical DP distinguishing tests (audit only)
    [canary]                 # canary clients in a run of their own: the whole run's claim, one run (audit only)
    enabled = true
    canaries = 500
    [membership]             # membership inference against the final model, reference runs beside it (audit only)
    level = "record"         # record | client

    [limits]                 # what this machine allows a run (not part of the experiment, left out of to_dict)
    max_memory_gib = 64      # the estimated memory a run may need (unset: this machine's memory)
    threads = 2              # numba's pool size (unset: the CPUs others leave free, per stage); never changes a result

Every error names the offending key and what is allowed, in one line; every size-like key has an upper bound
(``auditkit.config_bounds.SIZES``), and a training run's estimated memory is checked against ``[limits]``
(``auditkit.fl.memory``) before it starts.
"""
from __future__ import annotations

import dataclasses
import itertools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from auditkit import mechanisms
from auditkit.accounting.composition import ACCOUNTANTS
from auditkit.config_bounds import (  # ConfigError and RENAMED_KEYS are auditkit.config's names too
    RANGES, RENAMED_KEYS, SIZES, ConfigError, check_keys, check_mechanism_noise)
from auditkit.config_bounds import device as _device, name_length
from auditkit.config_bounds import reject_unknown as _reject_unknown, section as _section
from auditkit.data import DATASETS, PARTITION_SCHEMES, DataNotFoundError, dataset_available, load_dataset
from auditkit.data.catalog import EMBEDDED
from auditkit.data.factory import DatasetName
from auditkit.factories import parse_factory
from auditkit.fl.schedule import LR_SCHEDULES
from auditkit.fl.spec import DPSGDSpec, TrainingSpec
from auditkit.fl.sampling import PARTICIPATION
from auditkit.flower.settings import FlowerConfig, check_training
from auditkit.mechanisms.protocol import selects_clients
from auditkit.models import NORMS, ModelName
from auditkit.models.torchvision_models import is_resnet
from auditkit.mechanisms import View
from auditkit.validation import Choice, Constraint, Integer, ListOf, Number, Text, ValidationError
from auditkit.attacks.gradient_inversion import INVERSION_ATTACKS
from auditkit.flower.install import flower_missing
from auditkit.attacks.one_run import BOUNDS, GUESS_RULES
from auditkit.attacks.membership_game import MEMBERSHIP_LEVELS

# the bundled presets: the TOML files of auditkit/presets, the default first
PRESETS = ("quickstart", *sorted(entry.name.removesuffix(".toml") for entry in resources.files("auditkit.presets").iterdir()
                                 if entry.name.endswith(".toml") and entry.name != "quickstart.toml"))
TRAINING_BACKENDS = ("builtin", "flower")
CLIENT_WEIGHTS = ("data", "uniform")


@dataclass(frozen=True)
class DataConfig:
    """Which dataset and how it is split across clients."""

    dataset: str = "mnist-5k"
    prefer: str | None = None  # used instead of `dataset` when data_dir holds its files (the papers' data)
    data_dir: str | None = None
    download: bool = False
    partition: str = "iid"
    dirichlet_alpha: float = 0.5
    shards_per_client: int = 2  # partition "shards": shards of label-sorted samples per client (McMahan et al. 2017)
    validation_fraction: float = 0.1
    test_fraction: float = 0.2  # imagefolder without train/ and test/ folders: the share of each class held out
    image_size: int = 32  # imagefolder: every image resized to this many pixels square, RGB


@dataclass(frozen=True)
class TrainingConfig(TrainingSpec):
    """The ``[training]`` table: the FL engine's run (``auditkit.fl.spec.TrainingSpec``: clients, local steps,
    optimiser, schedule, participation, checkpoints) plus the model and the engine that runs it."""

    model: str = "cnn"  # a seed model, torchvision:NAME or a factory (auditkit.models.create)
    backend: str = "builtin"  # builtin (the batched simulator in this process) | flower (Flower's Simulation Engine)
    small_stem: bool = False  # the ResNet family's small-image stem (auditkit.models.torchvision_models)
    norm: str = "batch"  # batch | group: every BatchNorm replaced by GroupNorm (DP-SGD needs per-example statistics)


@dataclass(frozen=True)
class MechanismConfig:
    """A registered mechanism's name and its parameters (validated by ``auditkit.mechanisms.create``).

    ``sweep`` maps parameter names to the values of a grid (``grid()`` expands it into one setting
    per combination); ``label`` is the display name in reports (default: the name and parameters).
    """

    name: str = "none"
    params: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    sweep: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    protocol_options: dict[str, Any] = field(default_factory=dict)  # keys its round protocol declares (``options``)

    target_eps: float | None = None  # set by grid(): the target the noise parameter was calibrated to

    def grid(self) -> list["MechanismConfig"]:
        """One sweep-free setting per combination of the sweep's values (itself when there is no sweep). A
        ``target_eps`` (fixed or swept) is turned into the mechanism's noise parameter
        (``auditkit.mechanisms.calibrate``): the point's params hold the noise, ``target_eps`` records the target."""
        axes = list(self.sweep)
        points = []
        for values in itertools.product(*(self.sweep[a] for a in axes)):
            chosen = dict(zip(axes, values))
            label = None if self.label is None else f"{self.label} {_describe(chosen)}".strip()
            points.append(dataclasses.replace(self, params={**self.params, **chosen}, label=label, sweep={})
                          ._calibrated())
        return points

    def _calibrated(self) -> "MechanismConfig":
        if "target_eps" not in self.params:
            return self
        params = dict(self.params)
        target = params.pop("target_eps")
        label = self.label if self.label is not None else f"{self.name} {_describe({'target_eps': target, **params})}"
        return dataclasses.replace(self, params=mechanisms.calibrate(self.name, target, **params), label=label,
                                   target_eps=float(target))

    @property
    def display(self) -> str:
        """The label, or the name with its parameters."""
        return self.label if self.label is not None else (f"{self.name} {_describe(self.params)}".strip())


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


PROBE_SCALES = ("clip", "none")


@dataclass(frozen=True)
class AccountingConfig:
    """How each setting's claim is composed over the rounds run: the delta at which the composed epsilon is
    stated, and the accountant (``auditkit.accounting.composition.ACCOUNTANTS``)."""

    composition_delta: float = 1e-5
    accountant: str = "opacus-prv"


@dataclass(frozen=True)
class InversionConfig:
    """Gradient inversion of the ``server`` view at one checkpoint round, beside the clean update.

    ``round`` defaults to the first checkpoint; ``targets`` is how many of that round's clients are attacked
    (one reconstruction each); ``restarts``: starts per attacked image, the lowest final matching loss kept
    (default: the attack's preset, ``auditkit.attacks.preset_settings``: 4 for DLG / iDLG, 2 for Inverting Gradients, since
    one L-BFGS start is a coin, ``auditkit.attacks.gradient_inversion``); ``unroll`` unrolls the tau local steps instead of
    reading -x/(lr tau) as one gradient. ``iterations``: default the budget of the attack's device
    (``auditkit.stages.inversion.attack_iterations``: 200 on a CPU, five times as many on a GPU).
    """

    enabled: bool = True
    attack: str = "inverting_gradients"
    round: int | None = None
    targets: int = 4
    iterations: int | None = None
    restarts: int | None = None
    unroll: bool = False


@dataclass(frozen=True)
class ProbeConfig:
    """The inversion probe at the claim's worst case (``auditkit.stages.probe``): at the checkpoint round (``round``,
    default: the inversion round), ``targets`` probe clients each hold ``batch_size`` examples, run ``local_steps``
    full-batch SGD steps from the global model, and send the update through the mechanism; the server inverts it
    with ``attack`` (``analytic``: the first fully-connected layer's input recovered exactly, then the layers
    before it inverted; ``iterations`` bounds any optimisation, default 300 on a CPU, five times as many on a GPU).
    The same attack runs on the clean updates.
    ``scale = "clip"`` rescales every probe and candidate update to the mechanism's clipping norm (in its
    ``clip_norm``), the size the claim's sensitivity allows and the worst case it must cover (a client with a
    larger learning rate sends it); "none" keeps the updates as computed (the mechanism clips them).
    ``sweep``: also run the same attack on the same updates with the mechanism recalibrated along a grid of
    epsilons from the audited claims upwards, to show where reconstruction from one update begins
    (``auditkit.stages.probe.reconstruction_sweep``; settings that differ only in their epsilon share one sweep)."""

    enabled: bool = True
    attack: str = "analytic"
    round: int | None = None
    targets: int = 16
    batch_size: int = 1
    local_steps: int = 1
    iterations: int | None = None
    scale: str = "clip"
    sweep: bool = True


@dataclass(frozen=True)
class IdentificationConfig:
    """The informed adversary's identification test (``auditkit.attacks.identify``) on the probe's updates: the target is
    one of ``candidates`` real examples (each M a test), ``trials`` trials each, judged against the claim's
    reconstruction-robustness bound (``auditkit.stages.identification``)."""

    enabled: bool = True
    candidates: tuple[int, ...] = (10, 100)
    trials: int = 500
    pool: int | None = None  # the examples whose updates the adversary scores (unset: 2 x max(candidates), >= 200)


@dataclass(frozen=True)
class DistinguishConfig:
    """Black-box distinguishing tests of each mechanism setting (and its adaptive tests), Bonferroni over every
    test of the audit at ``confidence``. ``search``: the neighbouring pairs share their budget (``trials`` each)
    in a worst-pair search whose one held-out test counts as one test (``auditkit.attacks.pair_search``); false: every
    pair is tested with ``trials`` outputs and counts as a test."""

    enabled: bool = True
    trials: int = 100_000
    confidence: float = 0.95
    adaptive: bool = True
    search: bool = True


CANARY_VIEWS = (View.SERVER, View.AGGREGATE, View.PUBLIC)
MEMBERSHIP_VIEWS = (View.PUBLIC, View.SERVER)


@dataclass(frozen=True)
class CanaryConfig:
    """Canary clients (Andrew et al. 2024) join a training run of their own, like the audited one: ``canaries``
    of them, each included with probability 1/2 and sampled like every client; each judged view's scores give a
    one-run bound (``bound``: "fdp" or "steinke", ``auditkit.attacks.one_run``, ``guesses``: "grid" or "claim")
    against the whole run's composed claim, one test of the audit's Bonferroni family per view. ``view``: "server",
    "aggregate" or "public"; unset: every view the claim covers (``auditkit.stages.canary.judged_views``)."""

    enabled: bool = False
    canaries: int = 500
    bound: str = "fdp"
    view: str | None = None
    guesses: str = "grid"


@dataclass(frozen=True)
class MembershipConfig:
    """Membership inference against the final global model (``auditkit.stages.membership``): a target run and
    ``references`` reference runs of the same config on re-drawn memberships, trained together; ``level`` "record"
    (``records`` training records tested, each in its client's data with probability 1/2) or "client" (every client in
    the federation with probability 1/2); RMIA compares with ``population`` held-out records; ``mislabelled``: the
    record candidates carry a wrong label (the canaries of DP audits: records a model can only fit by memorising
    them); ``view``: the model attacked, "public" (each run's final global model) or "server" (record level, full
    participation: the model each client sent in the last round, as the server decodes it). Each attack's one-run
    bound on the target run is one test of the audit's Bonferroni family."""

    enabled: bool = False
    level: str = "record"
    references: int = 8
    records: int = 500
    population: int = 1000
    mislabelled: bool = False
    view: str = View.PUBLIC


@dataclass(frozen=True)
class LimitsConfig:
    """What this machine allows a run: ``max_memory_gib``, the memory (GiB) a training run's estimate may need
    (``auditkit.fl.memory``; unset: this machine's physical memory, or its cgroup's limit when lower); ``threads``,
    the size of numba's thread pool (``auditkit.fl.threads``; unset: the CPUs other processes leave free, measured
    before each stage; torch and BLAS compute with one thread whatever it is, so no result depends on it). A
    property of the machine, not of the experiment: ``AuditConfig.to_dict`` leaves it out, so results and stage keys
    never depend on it."""

    max_memory_gib: float | None = None
    threads: int | None = None


@dataclass(frozen=True)
class AuditConfig:
    """Everything an audit run needs; the same config and seed give the same numbers."""

    seed: int = 0
    device: str = "auto"
    title: str | None = None
    plugins: tuple[str, ...] = ()
    data: DataConfig = field(default_factory=DataConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    tables: dict[str, Any] = field(default_factory=dict)  # the config tables round protocols own, parsed, by name
    flower: FlowerConfig = field(default_factory=FlowerConfig)
    mechanisms: tuple[MechanismConfig, ...] = (MechanismConfig(),)
    accounting: AccountingConfig = field(default_factory=AccountingConfig)
    dp_sgd: DPSGDSpec = field(default_factory=DPSGDSpec)
    inversion: InversionConfig = field(default_factory=InversionConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    identification: IdentificationConfig = field(default_factory=IdentificationConfig)
    distinguish: DistinguishConfig = field(default_factory=DistinguishConfig)
    canary: CanaryConfig = field(default_factory=CanaryConfig)
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)

    @property
    def checkpoint_round(self) -> int | None:
        """The round whose server view the inversion attacks (``inversion.round``, default the first checkpoint)."""
        checkpoints = self.training.checkpoints
        return self.inversion.round or (checkpoints[0] if checkpoints else None)

    @property
    def probe_round(self) -> int | None:
        """The round at whose global model the probe and the identification test run (default: the inversion's)."""
        return self.probe.round or self.checkpoint_round

    @property
    def mechanism(self) -> MechanismConfig:
        """The one mechanism setting of a single-setting config (what ``train`` runs)."""
        settings = self.settings()
        if len(settings) != 1:
            raise ConfigError(
                f"this config holds {len(settings)} mechanism settings; `auditkit train` runs one "
                "(use `auditkit audit`, or give --mechanism)"
            )
        return settings[0]

    def settings(self) -> list[MechanismConfig]:
        """Every mechanism setting of the audit, sweeps expanded, in config order."""
        return [point for m in self.mechanisms for point in m.grid()]

    def with_setting(self, setting: MechanismConfig) -> "AuditConfig":
        """This config restricted to one (sweep-free) mechanism setting."""
        return dataclasses.replace(self, mechanisms=(setting,))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain TOML/JSON-friendly data (round-trips through `from_dict`)."""
        out = dataclasses.asdict(self)
        out.pop("mechanisms")
        out.pop("limits")  # the machine's, not the experiment's (LimitsConfig)
        out["mechanisms"] = [_mechanism_table(m) for m in self.mechanisms]
        out["training"]["checkpoints"] = list(out["training"]["checkpoints"])
        out["identification"]["candidates"] = list(out["identification"]["candidates"])
        out["plugins"] = list(self.plugins)
        del out["tables"]
        for name, table in self.tables.items():
            out[name] = {k: list(v) if isinstance(v, tuple) else v
                         for k, v in dataclasses.asdict(table).items() if v is not None}
        if self.training.backend != "flower":
            del out["flower"]
        if not self.dp_sgd.enabled:
            del out["dp_sgd"]
        return {k: v for k, v in out.items() if v is not None}


def _mechanism_table(m: MechanismConfig) -> dict[str, Any]:
    table: dict[str, Any] = {"name": m.name, **m.params, **m.protocol_options}
    if m.label is not None:
        table["label"] = m.label
    if m.sweep:
        table["sweep"] = {k: list(v) for k, v in m.sweep.items()}
    return table


# ---------------------------------------------------------------- loading


def read_config(path: str | Path) -> dict[str, Any]:
    """The raw tables of a TOML config file; its ``plugins`` given as ``.py`` paths, and the factory files
    ``training.model``, ``data.dataset`` and ``data.prefer`` name (``my_models.py:make_net``), are made relative to the
    file's folder (a config and the plugin or factory beside it move together)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {err}") from None
    plugins = raw.get("plugins")
    if isinstance(plugins, list):
        raw["plugins"] = [str(path.parent / p) if isinstance(p, str) and p.endswith(".py") and not Path(p).is_absolute()
                          else p for p in plugins]
    for table, key in (("training", "model"), ("data", "dataset"), ("data", "prefer")):  # factory files, alike
        section = raw.get(table)
        factory = parse_factory(section.get(key)) if isinstance(section, dict) else None
        if factory is not None and factory.kind == "file" and not Path(factory.target).is_absolute():
            section[key] = f"{path.parent / factory.target}:{factory.function}"
    return raw


def load_config(path: str | Path) -> AuditConfig:
    """Read and validate a TOML config file."""
    return from_dict(read_config(path))


def preset_dict(name: str, *, mechanisms: bool = True) -> dict[str, Any]:
    """The raw TOML tables of a bundled preset; ``mechanisms=False`` leaves out its mechanism settings (the
    setting alone: data and training, for a run of one mechanism of one's own)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    text = resources.files("auditkit.presets").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    return raw if mechanisms else {k: v for k, v in raw.items() if k not in ("mechanism", "mechanisms")}


def load_preset(name: str) -> AuditConfig:
    """A bundled preset (``PRESETS``): ``quickstart`` (the default) or one of the papers' comparisons."""
    return from_dict(preset_dict(name))


def from_dict(raw: dict[str, Any]) -> AuditConfig:
    """Validate raw config tables (as read from TOML) into an `AuditConfig`; ``ConfigError`` naming the key."""
    try:
        return _from_dict(raw)
    except ValidationError as err:  # a value refused by its constraint (auditkit.validation)
        raise err if isinstance(err, ConfigError) else ConfigError(str(err)) from None


def _from_dict(raw: dict[str, Any]) -> AuditConfig:
    plugins = _plugins(raw.get("plugins", []))  # first: a plugin may register a round protocol with its own table
    protocol_tables = mechanisms.protocol_tables()
    top_allowed = {"seed", "device", "title", "plugins", "data", "training", "flower", "mechanism", "mechanisms",
                   "accounting", "dp_sgd", "inversion", "probe", "identification", "distinguish", "canary",
                   "membership", "limits", *protocol_tables}
    _reject_unknown(raw, top_allowed, "")
    seed = _SEED.check(raw.get("seed", 0), "seed")
    device = _device(raw.get("device", "auto"))
    title = raw.get("title")
    if title is not None:
        name_length(Text().check(title, "title"), "title")
    data = _section(raw.get("data", {}), DataConfig, "data")
    training = _section(raw.get("training", {}), TrainingConfig, "training")
    config = AuditConfig(
        seed=seed, device=device, title=title, plugins=plugins, data=data, training=training,
        tables={name: _section(raw[name], cls.table_type, name) for name, cls in protocol_tables.items() if name in raw},
        flower=_section(raw.get("flower", {}), FlowerConfig, "flower"), mechanisms=_mechanisms(raw),
        accounting=_section(raw.get("accounting", {}), AccountingConfig, "accounting"),
        dp_sgd=_dp_sgd(raw.get("dp_sgd", {})),
        inversion=_section(raw.get("inversion", {}), InversionConfig, "inversion"),
        probe=_section(raw.get("probe", {}), ProbeConfig, "probe"),
        identification=_section(raw.get("identification", {}), IdentificationConfig, "identification"),
        distinguish=_section(raw.get("distinguish", {}), DistinguishConfig, "distinguish"),
        canary=_section(raw.get("canary", {}), CanaryConfig, "canary"),
        membership=_section(raw.get("membership", {}), MembershipConfig, "membership"),
        limits=_section(raw.get("limits", {}), LimitsConfig, "limits"),
    )
    _check_values(config)
    return _resolve_preferred_dataset(config)


def _dp_sgd(table: Any) -> DPSGDSpec:
    """The ``[dp_sgd]`` table: a table that sets keys turns DP-SGD on only with ``noise_multiplier``, so a
    ``max_grad_norm`` alone is refused rather than ignored."""
    dp_sgd = _section(table, DPSGDSpec, "dp_sgd")
    if table and not dp_sgd.enabled:
        raise ConfigError("dp_sgd.noise_multiplier must be given to turn DP-SGD on ([dp_sgd] sets "
                          f"{', '.join(sorted(table))} without it)")
    return dp_sgd


def _plugins(value: Any) -> tuple[str, ...]:
    """The ``plugins`` list, each module loaded (``auditkit.mechanisms.load_plugins``) so its mechanisms can be named."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"plugins must be a list of module names such as ['my_pkg.my_mech'], got {value!r}")
    try:
        mechanisms.load_plugins(value)
    except mechanisms.PluginError as err:
        raise ConfigError(str(err)) from None
    return tuple(v.strip() for v in value)


def _resolve_preferred_dataset(config: AuditConfig) -> AuditConfig:
    """``data.prefer`` (the papers' data) replaces the embedded ``data.dataset`` when ``data.data_dir`` holds its
    files (or ``download`` fetches them); with no data_dir the embedded dataset runs, as the presets state. A
    data_dir given without the preferred files is an error, never a silent fallback (issue 39); a ``dataset`` that
    itself needs files (``--dataset cifar10``) was chosen over the preference and is kept. Either way the config
    that runs names one concrete dataset."""
    d = config.data
    if d.prefer is None:
        return config
    dataset = d.dataset
    if d.dataset in EMBEDDED and d.data_dir is not None:
        if not (d.download or dataset_available(d.prefer, d.data_dir)):
            raise ConfigError(f"data.data_dir: {_missing_files(d.prefer, d.data_dir)}; or leave data_dir out to run "
                              f"on the embedded {d.dataset} (data.prefer = {d.prefer!r})")
        dataset = d.prefer
    return dataclasses.replace(config, data=dataclasses.replace(d, dataset=dataset, prefer=None))


def _missing_files(name: str, data_dir: str) -> str:
    """The data layer's one line on which files ``name`` needs where (``DataNotFoundError``): its loader checks its
    files before it reads anything, and they are absent here."""
    try:
        load_dataset(name, data_dir=data_dir)
    except DataNotFoundError as err:
        return str(err)
    return f"{name} not found in {data_dir!r}"  # pragma: no cover - dataset_available said they were absent


def _mechanisms(raw: dict[str, Any]) -> tuple[MechanismConfig, ...]:
    if "mechanism" in raw and "mechanisms" in raw:
        raise ConfigError("give either a [mechanism] table or [[mechanisms]] tables, not both")
    if "mechanisms" not in raw:
        return (_mechanism(raw.get("mechanism", {}), "mechanism"),)
    tables = raw["mechanisms"]
    if not isinstance(tables, list) or not tables:
        raise ConfigError("config key 'mechanisms' must be a non-empty array of tables ([[mechanisms]])")
    return tuple(_mechanism(table, f"mechanisms[{i}]") for i, table in enumerate(tables))


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Recursively overlay `overrides` (None values ignored) on raw config tables."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, dict):
            out[key] = merge(out.get(key, {}), value)
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------- validation helpers


def _mechanism(table: Any, where: str) -> MechanismConfig:
    """One mechanism table: name, optional label and sweep; every grid point is created once to validate it."""
    if not isinstance(table, dict):
        raise ConfigError(f"config key {where!r} must be a table")
    table = dict(table)
    name = table.pop("name", "none")
    label = table.pop("label", None)
    if label is not None:
        Text().check(label, f"{where}.label")
    sweep = _sweep(table.pop("sweep", {}), table, where)
    _refuse_renamed(name, table, sweep, where)
    options = _protocol_options(name, table, where)
    setting = MechanismConfig(name=name, params=table, label=label, sweep=sweep, protocol_options=options)
    try:
        points = setting.grid()
    except ValueError as err:
        raise ConfigError(str(err) if isinstance(err, ConfigError) else f"{where}: {err}") from None
    for point in points:  # its noise and eps in the range calibrate searches, before they overflow the claim
        check_mechanism_noise(setting, point.params, getattr(_class(name), "noise_param", None), where)
        name_length(point.display, f"{where}.label (with its sweep's values)")
        try:
            mechanisms.create(name, **point.params)
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
    return setting


def _refuse_renamed(name: str, params: dict[str, Any], sweep: dict[str, Any], where: str) -> None:
    """A renamed parameter's old name (``auditkit.mechanisms.registry.RENAMED_PARAMS``), fixed or swept, is refused
    with the new one: "mechanisms[0].bound was renamed to support"."""
    for key, prefix in [*((k, where) for k in params), *((k, f"{where}.sweep") for k in sweep)]:
        new = mechanisms.registry.renamed_param(name, key)
        if new is not None:
            raise ConfigError(f"{prefix}.{key} was renamed to {new} (mechanism {name!r})")


def _class(name: str) -> type | None:
    """The registered class of mechanism ``name`` (None: no such mechanism, ``create`` says so)."""
    try:
        return mechanisms.mechanism_class(name)
    except ValueError:
        return None


def _protocol_class(name: str) -> type | None:
    """The registered round protocol of mechanism ``name`` (None: none, or no such mechanism: ``create`` says so)."""
    protocol = getattr(_class(name), "protocol", None)
    return None if protocol is None else mechanisms.protocol_class(protocol)


def _protocol_options(name: str, table: dict[str, Any], where: str) -> dict[str, Any]:
    """Pop from a mechanism table the keys its round protocol declares (``options``), each validated by its spec."""
    protocol = _protocol_class(name)
    options = {}
    for spec in getattr(protocol, "options", ()):
        if spec.name in table:
            options[spec.name] = spec.constraint.check(table.pop(spec.name), f"{where}.{spec.name}")
    return options


def _sweep(sweep: Any, params: dict[str, Any], where: str) -> dict[str, tuple[Any, ...]]:
    if not isinstance(sweep, dict):
        raise ConfigError(f"{where}.sweep must be a table of parameter = [values], got {sweep!r}")
    out = {}
    for key, values in sweep.items():
        if key in params:
            raise ConfigError(f"{where}.sweep.{key} is also set as a fixed parameter; give it in one place")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.sweep.{key} must be a non-empty list of values, got {values!r}")
        out[key] = tuple(values)
    return out


_SEED = dataclasses.replace(SIZES["seed"], whole_floats=True)

CHOICES: dict[str, Constraint] = {
    "data.dataset": DatasetName(DATASETS), "data.partition": Choice(PARTITION_SCHEMES),
    "data.prefer": DatasetName(DATASETS), "training.model": ModelName(), "training.norm": Choice(NORMS),
    "training.participation": Choice(PARTICIPATION),
    "training.client_weights": Choice(CLIENT_WEIGHTS), "training.lr_schedule": Choice(LR_SCHEDULES),
    "training.backend": Choice(TRAINING_BACKENDS), "accounting.accountant": Choice(ACCOUNTANTS),
    "probe.scale": Choice(PROBE_SCALES), "canary.view": Choice(CANARY_VIEWS),
    "membership.level": Choice(MEMBERSHIP_LEVELS), "membership.view": Choice(MEMBERSHIP_VIEWS),
}
"""The config keys with a closed vocabulary, or a form (a model, a dataset: a name or a user's factory, parsed and not
imported here); ``auditkit.config_bounds`` holds the numbers' ranges."""


def _check_values(config: AuditConfig) -> None:
    t = config.training
    check_keys(config, SIZES)  # every size-like key within its bounds (auditkit.config_bounds.SIZES), first
    check_keys(config, RANGES)
    check_keys(config, CHOICES)
    _check_factory_files(config)
    _check_backend(config)
    if t.participation == "uniform":
        Integer(1, t.clients).check(t.clients_per_round, "training.clients_per_round (participation 'uniform')")
    if t.participation == "replacement":
        SIZES["training.clients_per_round"].check(t.clients_per_round,
                                                  "training.clients_per_round (participation 'replacement')")
    if t.participation == "poisson":
        Number(0, 1, low_open=True).check(t.sample_rate, "training.sample_rate (participation 'poisson')")
    ListOf(Integer(1, t.rounds)).check(list(t.checkpoints), "training.checkpoints")
    _check_protocols(config)
    _check_audit_stages(config)
    _check_dp_sgd(config)


def _check_factory_files(config: AuditConfig) -> None:
    """A factory file that ``training.model``, ``data.dataset`` or ``data.prefer`` names exists (its code is imported
    only where the model or data are built, ``auditkit.factories``); ``training.small_stem`` is for the ResNet
    family, whose names need no import to tell."""
    t, d = config.training, config.data
    for key, value in (("training.model", t.model), ("data.dataset", d.dataset), ("data.prefer", d.prefer)):
        factory = parse_factory(value)
        if factory is not None and factory.kind == "file" and not Path(factory.target).is_file():
            raise ConfigError(f"{key}: factory {value!r} failed to load: no such file")
    if t.recompute_activations and t.batched:
        raise ConfigError("training.recompute_activations needs training.batched = false: torch.func's vmap and grad, "
                          "which train the batched clients, refuse activation checkpointing (saved-tensor hooks)")
    if t.small_stem and not (t.model.startswith("torchvision:") and is_resnet(t.model.removeprefix("torchvision:"))):
        raise ConfigError("training.small_stem applies to the ResNet family (torchvision:resnet*, torchvision:resnext*, "
                          f"torchvision:wide_resnet*), not training.model {t.model!r}")


def _check_dp_sgd(config: AuditConfig) -> None:
    """A composition delta DP-SGD's Gaussian claim can be stated at (its noise multiplier and clip: ``RANGES``). That
    ``training.batch_size`` fits the smallest client is checked once the data are split
    (``auditkit.stages.train.prepare_data``)."""
    if config.dp_sgd.enabled and config.training.local_epochs is not None:
        raise ConfigError("training.local_epochs cannot be combined with [dp_sgd]: DP-SGD samples its own Poisson "
                          "batches for training.tau steps (what its accounting assumes); leave local_epochs out")
    if config.dp_sgd.enabled and config.accounting.composition_delta == 0:
        raise ConfigError("dp_sgd's example-level claim needs accounting.composition_delta > 0 (a Gaussian has no "
                          "finite epsilon at delta 0), got 0")


def _check_backend(config: AuditConfig) -> None:
    """``training.backend`` is known, Flower is installed when asked for, and ``[flower]``'s resources are numbers
    Ray accepts (whether the machine or cluster has them is checked when Ray is reached, ``auditkit.flower``)."""
    t, f = config.training, config.flower
    if t.backend != "flower":
        return

    missing = flower_missing()
    if missing:
        raise ConfigError(f"training.backend = 'flower' needs {missing}: pip install 'auditkit[flower]'")
    Number(low=0, low_open=True).check(f.num_cpus, "flower.num_cpus (CPUs per client)")
    Number(low=0).check(f.num_gpus, "flower.num_gpus (GPUs per client, fractions allowed)")
    if f.ray_address is not None and not f.ray_address.strip():
        raise ConfigError("flower.ray_address must be host:port or ray://host:port of a Ray head node (leave it "
                          "out to start Ray on this machine), got ''")


def _check_protocols(config: AuditConfig) -> None:
    """Each round protocol's table must fit the run (``check_table``), the run's participation its claim
    (``check_participation``), the ``[training]`` table its Flower counterpart on ``backend = "flower"``
    (``auditkit.flower.settings.check_training``), and each setting's protocol options the table (``check_options``)."""
    for name, table in config.tables.items():
        try:
            mechanisms.protocol_tables()[name].check_table(table, config.training.clients)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for i, m in enumerate(config.mechanisms):
        protocol = _protocol_class(m.name)
        check_participation = getattr(protocol, "check_participation", None)
        if check_participation is not None:
            try:
                check_participation(config.training.participation, config.training.sample_rate)
            except ValueError as err:
                raise ConfigError(f"mechanisms[{i}] ({m.name}): {err}") from None
        if protocol is not None and config.training.backend == "flower":
            try:
                check_training(protocol.name, config.training)
            except ValueError as err:
                raise ConfigError(f"mechanisms[{i}] ({m.name}): {err}") from None
        check = getattr(protocol, "check_options", None)
        if check is not None:
            try:
                check(m.protocol_options, config.tables.get(protocol.table))
            except ValueError as err:
                raise ConfigError(f"mechanisms[{i}].{err}") from None


def _check_probe(config: AuditConfig) -> None:
    probe, ident, t = config.probe, config.identification, config.training
    Choice(INVERSION_ATTACKS).check(probe.attack, "probe.attack")
    if (probe.enabled or ident.enabled) and not t.checkpoints:
        raise ConfigError("the probe needs at least one training.checkpoints round (or probe.enabled = false and "
                          "identification.enabled = false)")
    if probe.round is not None and probe.round not in t.checkpoints:
        raise ConfigError(f"probe.round must be one of the checkpoints {list(t.checkpoints)}, got {probe.round}")
    ListOf(SIZES["identification.candidates"], nonempty=True).check(list(ident.candidates),
                                                                    "identification.candidates")
    if ident.pool is not None:
        Integer(max(ident.candidates), SIZES["identification.pool"].high).check(
            ident.pool, "identification.pool (at least the largest identification.candidates)")
    if len(set(ident.candidates)) != len(ident.candidates):
        raise ConfigError(f"identification.candidates must not repeat a value, got {list(ident.candidates)}")


def _check_audit_stages(config: AuditConfig) -> None:
    inv, t = config.inversion, config.training
    Choice(INVERSION_ATTACKS).check(inv.attack, "inversion.attack")
    if inv.enabled and inv.round is not None and inv.round not in t.checkpoints:
        raise ConfigError(
            f"inversion.round must be one of the checkpoints {list(t.checkpoints)}, got {inv.round}"
        )
    if inv.enabled and not t.checkpoints:
        raise ConfigError("inversion needs at least one training.checkpoints round (or inversion.enabled = false)")
    _check_probe(config)
    _check_canary(config)
    m = config.membership
    if m.mislabelled and m.level != "record":
        raise ConfigError("membership.mislabelled needs membership.level = 'record': it relabels the records tested")
    if m.view == View.SERVER and (m.level != "record" or config.training.participation != "full"):
        raise ConfigError("membership.view = 'server' needs membership.level = 'record' and training.participation "
                          "= 'full': every client's last message is read (an absent client's is none)")
    if config.membership.enabled and config.training.backend != "builtin":
        raise ConfigError("membership.enabled needs training.backend = 'builtin': its reference runs train in the "
                          f"built-in simulation, got {config.training.backend!r}")


def _check_canary(config: AuditConfig) -> None:
    """``[canary]``'s values, and a run canary clients can join: the built-in backend, a protocol that lets the
    training loop choose who takes part."""
    c = config.canary
    Choice(BOUNDS).check(c.bound, "canary.bound")
    Choice(GUESS_RULES).check(c.guesses, "canary.guesses")
    if not c.enabled:
        return
    if config.training.backend != "builtin":
        raise ConfigError("canary.enabled needs training.backend = 'builtin': canary clients join the built-in "
                          f"simulation, got {config.training.backend!r}")
    for i, m in enumerate(config.mechanisms):
        protocol = _protocol_class(m.name)
        if protocol is not None and selects_clients(protocol):
            raise ConfigError(f"mechanisms[{i}] ({m.name}): canary.enabled needs a round protocol whose clients the "
                              f"training loop samples; {protocol.name} chooses its own (set canary.enabled = false)")
