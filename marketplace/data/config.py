"""The `data:` section of a scenario: where the rows come from and how they are shared out.

Every party rebuilds the same world from this section and the run seed, and keeps only its own
share, so a container needs nothing but the scenario file (see :func:`marketplace.data.world.build_world`).
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from marketplace.data.public_schema import DataSchema
from marketplace.data.sources import DEFAULT_KIND, SOURCES
from marketplace.schema import Length, MissingKeys, Range, SchemaError, required_keys

Positive = Annotated[int, Range(min=1)]
Probability = Annotated[float, Range(min=0.0, max=1.0)]


def _source_fields() -> list[tuple[str, Any, Any]]:
    """``kind`` plus one optional section per registered source kind: defaulted when every option
    has a default, else None (the scenario must give it when it picks that kind)."""
    fields: list[tuple[str, Any, Any]] = [("kind", Literal[tuple(SOURCES)], field(default=DEFAULT_KIND))]
    for kind, source in SOURCES.items():
        try:
            source.options()
        except TypeError:  # a required option (e.g. csv.path): no default section
            fields.append((kind, source.options | None, field(default=None)))
        else:
            fields.append((kind, source.options, field(default_factory=source.options)))
    return fields


def _check_section(self: Any) -> None:
    if getattr(self, self.kind) is None:
        raise ValueError(f"source.kind is {self.kind!r} but the source.{self.kind} section is missing")


def _schema_check(values: dict[str, Any], path: str) -> None:
    """While a scenario is read: a chosen kind whose options have required keys needs its section;
    the error lists every required key of it by key path (not one per attempt)."""
    kind = values.get("kind", DEFAULT_KIND)
    keys = required_keys(SOURCES[kind].options)
    if keys and values.get(kind) is None:
        section = f"{path}.{kind}" if path else kind
        raise MissingKeys(
            section,
            [f"{section}.{name}" for name, _ in keys],
            [what for _, what in keys],
            section=f"a {kind} section ({path or 'source'}.kind is {kind!r})",
        )


if TYPE_CHECKING:

    class SourceConfig:
        """The type checker's view of the dataclass built below: ``kind`` and one section per source
        kind, each holding the options class its source declares; the kinds (a protocol plug-in may
        add some) are found when :mod:`marketplace.data.sources` is imported, so a section's type
        is known only then."""

        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
        kind: str

        def __init__(self, *, kind: str = ..., **sections: Any) -> None: ...
        def __getattr__(self, kind: str) -> Any: ...

else:
    SourceConfig = make_dataclass(
        "SourceConfig",
        _source_fields(),
        frozen=True,
        namespace={
            "__post_init__": _check_section,
            "__schema_check__": staticmethod(_schema_check),
            "__module__": __name__,
        },
    )
    SourceConfig.__doc__ = """Where the rows come from: ``kind`` picks a source (one module per kind in
:mod:`marketplace.data.sources`), and the section named after it holds that source's options."""


@dataclass(frozen=True)
class PartitionConfig:
    """How the owners' pool is split among the K owners.

    * ``even``: a random even split.
    * ``by_group``: skewed by group; owner i favours groups i, i+K, ...: a row of a favoured group
      goes to that owner with probability `skew`, otherwise to a uniformly random owner.
    * ``attribute_distance``: the rule of docs/design.md §4 on numeric feature `attribute`: each owner
      draws a_i uniform in that feature's range and a row goes to owner i with probability
      proportional to 1/|x_a - a_i|.
    * ``target_to_one``: the paper's experiment: every owners'-pool row of the consumer's target
      groups goes to owner-1, every other row is split evenly among all owners. With
      ``data.consumer.target_share: 0.3`` owner-1 holds 70% of the target population.

    ``groups`` restricts the owners' pool to rows of those groups (empty: every group), e.g. one
    base population plus the target groups.
    """

    scheme: Literal["even", "by_group", "attribute_distance", "target_to_one"] = "by_group"
    skew: Probability = 0.8
    attribute: Annotated[int, Range(min=0)] = 0
    groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerConfig:
    """The consumer's target: rows drawn from the `target_groups`, split into D_v and a test set.

    `target_share` of the rows of the target groups are set aside as the target pool (the rest stay
    with the owners, so owners do hold target-like data); D_v and test are drawn from that pool.
    """

    target_groups: Annotated[tuple[int, ...], Length(min=1)] = (0,)
    target_share: Annotated[float, Range(min=0.0, max=1.0, min_open=True, max_open=True)] = 0.3
    validation_size: Positive = 200
    test_size: Positive = 500


@dataclass(frozen=True)
class SeedSetConfig:
    """The public seed set D_init, drawn from groups outside the target (a third distribution)."""

    groups: tuple[int, ...] = ()
    """Groups to draw from; empty means every group not in the target."""
    size: Annotated[int, Range(min=0)] = 50


@dataclass(frozen=True)
class DataConfig:
    """Where the rows come from. Either ``source``: one dataset that every party rebuilds from the
    seed and shares out (a simulation, with every central reference), or ``schema``: a public
    schema only, each party bringing its own rows (owners their files, the consumer its target), so
    that no process ever holds another party's rows (:mod:`marketplace.data.public_schema`)."""

    source: SourceConfig = field(default_factory=SourceConfig)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    seed_set: SeedSetConfig = field(default_factory=SeedSetConfig)
    schema: DataSchema | None = None
    """The public schema of a marketplace whose parties bring their own rows; ``source``,
    ``partition`` and ``data.consumer.target_*`` then do not apply, and the seed set is empty."""

    @staticmethod
    def __schema_check__(values: dict[str, Any], path: str) -> None:
        if values.get("schema") is None:
            return
        prefix = f"{path}." if path else ""
        for key in ("source", "partition"):
            if key in values:
                raise SchemaError(
                    f"{prefix}{key}",
                    f"no {key} beside {prefix}schema (a marketplace is described by "
                    f"a dataset to simulate, data.source, or by the public schema of its parties' own "
                    f"rows, data.schema, not both)",
                    f"a {key} section",
                )
        seed_set = values.setdefault("seed_set", SeedSetConfig(size=0))
        if seed_set.size:
            raise SchemaError(
                f"{prefix}seed_set.size",
                f"0 beside {prefix}schema (a schema-only marketplace has no public seed set)",
                str(seed_set.size),
            )

    @property
    def schema_only(self) -> bool:
        """Whether the parties bring their own rows (``schema``) instead of sharing out ``source``."""
        return self.schema is not None
