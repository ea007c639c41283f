"""``latch.records.dataclass`` makes the classes ``dataclasses.dataclass`` makes: each declaration below is compiled
twice, once with each decorator, and the two classes are compared by what a caller sees (signature, fields, equality,
hash, repr, frozen errors, pickling, ``replace``, ``asdict``, declaration errors). Every class Latch declares with it
has the signature and ``__match_args__`` dataclasses would give it.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import sys
import types
from typing import Any

import pytest

import latch
from latch import records

PRELUDE = """
from __future__ import annotations
import dataclasses
from typing import ClassVar
"""

CLASSES = {
    "frozen_slots": """
@dataclass(frozen=True, slots=True)
class Point:
    '''A point.'''
    KIND: ClassVar[str] = "point"
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    extra: dict[str, int] = dataclasses.field(default_factory=dict)
""",
    "frozen_subclass": """
@dataclass(frozen=True, slots=True)
class Base:
    text: str
    media: tuple[str, ...] = ()

@dataclass(frozen=True, slots=True)
class Point(Base):
    who: str = ""
    hidden: int = dataclasses.field(default=3, repr=False, compare=False)
""",
    "frozen_no_slots_no_doc": """
@dataclass(frozen=True)
class Point:
    x: int
    y: list[int] = dataclasses.field(default_factory=list)
""",
    "plain_mutable": """
@dataclass
class Point:
    x: int
    y: str = "a"
    seen: list[int] = dataclasses.field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        self.y = self.y * 2
""",
    "explicit_hash_and_eq": """
@dataclass(frozen=True)
class Point:
    x: int
    y: int = 1

    def __hash__(self) -> int:
        return 7
""",
    "post_init_frozen_slots": """
@dataclass(frozen=True, slots=True)
class Point:
    x: int = 1
    y: int = 2

    def __post_init__(self) -> None:
        if self.x > self.y:
            raise ValueError("x above y")
""",
    "no_fields": """
@dataclass(frozen=True, slots=True)
class Point:
    KIND: ClassVar[str] = "empty"
""",
    "one_field_not_init": """
@dataclass
class Point:
    x: int
    total: int = dataclasses.field(default=0, init=False)
    items: list[int] = dataclasses.field(default_factory=list, init=False)
""",
}

BAD = {
    "non_default_after_default": ("@dataclass\nclass Point:\n    x: int = 1\n    y: int\n", TypeError),
    "mutable_default": ("@dataclass\nclass Point:\n    x: list[int] = []\n", ValueError),
    "frozen_from_plain": (
        "@dataclass\nclass Base:\n    x: int = 1\n\n@dataclass(frozen=True)\nclass Point(Base):\n    y: int = 2\n",
        TypeError,
    ),
    "plain_from_frozen": (
        "@dataclass(frozen=True)\nclass Base:\n    x: int = 1\n\n@dataclass\nclass Point(Base):\n    y: int = 2\n",
        TypeError,
    ),
    "frozen_with_setattr": (
        "@dataclass(frozen=True)\nclass Point:\n    x: int\n    def __setattr__(self, n, v):\n        pass\n",
        TypeError,
    ),
}


def _declare(source: str, decorator: Any, tag: str) -> dict[str, Any]:
    name = f"_records_parity_{tag}_{id(decorator)}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses reads string annotations through it; pickle finds the classes there
    module.__dict__["dataclass"] = decorator
    exec(compile(PRELUDE + source, f"<{tag}>", "exec"), module.__dict__)
    return module.__dict__


def _instances(cls: type) -> list[Any]:
    params = inspect.signature(cls).parameters
    required = [p for p in params.values() if p.default is inspect.Parameter.empty]
    args = {p.name: 1 if p.name == "x" else "t" for p in required}
    out = [cls(**args)]
    for n, p in enumerate(params.values()):
        if p.name in ("x", "y") and p.default is not inspect.Parameter.empty:
            out.append(cls(**{**args, p.name: p.default if p.name == "y" and p.default == 1 else n + 2}))
    if "text" in params:
        out.append(cls(**{**args, "text": "other"}))
    for name, value in (("hidden", 9), ("seen", [5])):  # fields left out of equality (and hash, and repr)
        if name in params:
            out.append(cls(**{**args, name: value}))
    return out


def _observed(cls: type, objs: list[Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {
        "signature": str(inspect.signature(cls)),
        "match_args": getattr(cls, "__match_args__", None),
        "slots": cls.__dict__.get("__slots__"),
        "doc": cls.__doc__,
        "fields": [(f.name, f.type, f.default, f.init, f.repr, f.compare) for f in dataclasses.fields(cls)],
        "params": {k: getattr(cls.__dataclass_params__, k) for k in ("init", "repr", "eq", "order", "frozen")},
        "is_dataclass": dataclasses.is_dataclass(cls),
        "hashable": cls.__hash__ is not None,
        "repr": [repr(o) for o in objs],
        "eq": [[a == b for b in objs] for a in objs],
        "ne_other_type": [o == (1,) for o in objs],
        "asdict": [dataclasses.asdict(o) for o in objs],
        "replace": [repr(dataclasses.replace(o)) for o in objs],
        "copy_equal": [copy.deepcopy(o) == o for o in objs],
        "pickle_equal": [pickle.loads(pickle.dumps(o)) == o for o in objs],
    }
    if cls.__hash__ is not None:
        try:
            seen["hash_equal"] = [[(hash(a) == hash(b)) for b in objs if a == b] for a in objs]
            seen["hash_of_values"] = [hash(o) for o in objs]
        except TypeError as exc:  # a field holds a dict
            seen["hash_equal"] = str(exc)
    frozen_errors = []
    for o in objs:
        for op in (lambda o: setattr(o, "x", 5), lambda o: delattr(o, "x"), lambda o: setattr(o, "zz", 1)):
            try:
                op(o)
                frozen_errors.append(None)
            except Exception as exc:  # the exception's type and message are what is compared
                frozen_errors.append((type(exc).__name__, str(exc).split(" (")[0]))
    seen["assignment"] = frozen_errors
    return seen


@pytest.mark.parametrize("tag", sorted(CLASSES))
def test_a_declaration_gives_the_class_dataclasses_gives(tag):
    theirs = _declare(CLASSES[tag], dataclasses.dataclass, tag)["Point"]
    ours = _declare(CLASSES[tag], records.dataclass, tag)["Point"]
    lazy = ("__init__", "__repr__", "__eq__")  # compiled at first use, not at declaration
    assert all(isinstance(ours.__dict__[name], records._Lazy) for name in lazy)
    a, b = _observed(theirs, _instances(theirs)), _observed(ours, _instances(ours))
    if tag == "frozen_slots" or tag == "frozen_subclass" or tag == "post_init_frozen_slots" or tag == "no_fields":
        # Python 3.11's frozen slotted dataclass compares against the class it replaced, so assigning a name that is
        # no field raises a TypeError from super(); the compiled-free class raises FrozenInstanceError, as 3.12 does
        a.pop("assignment")
        b.pop("assignment")
    assert a == b


def test_post_init_and_default_factories_run_per_instance():
    ours = _declare(CLASSES["plain_mutable"], records.dataclass, "post")["Point"]
    p, q = ours(1), ours(2)
    assert p.y == "aa" and p.seen == [] and p.seen is not q.seen
    Checked = _declare(CLASSES["post_init_frozen_slots"], records.dataclass, "post2")["Point"]
    with pytest.raises(ValueError, match="x above y"):
        Checked(3, 2)


@pytest.mark.parametrize("tag", sorted(BAD))
def test_a_bad_declaration_fails_as_with_dataclasses(tag):
    source, error = BAD[tag]
    with pytest.raises(error):
        _declare(source, dataclasses.dataclass, tag)
    with pytest.raises(error):
        _declare(source, records.dataclass, tag)


def _latch_record_classes() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(latch.__path__, "latch."):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # an optional extra that is not installed (textual, the providers' SDKs)
            continue
        for value in vars(module).values():
            if isinstance(value, type) and "__dataclass_fields__" in value.__dict__:
                if value.__module__.startswith("latch.") and value.__module__ != records.__name__:
                    found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


def test_every_latch_record_has_the_signature_dataclasses_gives_it():
    classes = _latch_record_classes()
    assert len(classes) > 100
    for cls in classes:
        ns: dict[str, Any] = {"__annotations__": {}, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        for f in dataclasses.fields(cls):
            ns["__annotations__"][f.name] = f.type
            ns[f.name] = dataclasses.field(
                default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr, compare=f.compare
            )
        twin = dataclasses.dataclass(type(cls.__name__, (), ns), frozen=cls.__dataclass_params__.frozen)
        assert str(inspect.signature(cls)) == str(inspect.signature(twin)), cls
        assert cls.__match_args__ == twin.__match_args__, cls
        assert (cls.__hash__ is None) == (twin.__hash__ is None), cls


def test_pending_inits_are_named_and_compiled_on_demand():
    from latch import records

    @records.dataclass(frozen=True)
    class First:
        a: int

    @records.dataclass(frozen=True)
    class Second:
        b: str = "x"

    namespace = {"First": First, "Second": Second, "int": int}
    First(1)  # constructed once: its __init__ is compiled
    assert records.pending_inits(namespace, __name__) == ["Second"]
    assert records.pending_inits(namespace, "elsewhere") == []  # only the classes made in that module
    assert records.compile_pending_inits(namespace, __name__) == 1
    assert records.pending_inits(namespace, __name__) == [] and Second().b == "x"
    assert isinstance(vars(Second)["__repr__"], records._Lazy)  # the other methods stay to their first use
