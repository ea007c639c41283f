"""Data classes declared as with :func:`dataclasses.dataclass`, without compiling code when their module is imported.

``dataclasses.dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and, for a frozen
class, ``__setattr__`` and ``__delattr__`` as source text and compiles them: about six ``exec`` calls a class, half a
millisecond for a frozen, slotted class with a few fields. ``latch replay`` imports about ninety such classes (the
event kinds, the port's records, the kernel's facts) and constructs a dozen of them.

:func:`dataclass` takes the same arguments and gives the same classes: the same fields
(:func:`dataclasses.fields`, :func:`dataclasses.replace`, :func:`dataclasses.asdict` and
:func:`dataclasses.is_dataclass` work on them), ``__dataclass_params__``, ``__match_args__``, ``__slots__``,
``__doc__``, the same equality, hash, ``repr``, frozen assignment errors (:class:`dataclasses.FrozenInstanceError`),
pickling and ``__init__`` signature (``__post_init__`` is called). The difference is when the code is made:
``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` are compiled from the source dataclasses writes for them the
first time each is used (the class constructed, compared, hashed, printed, or its ``__init__`` read, as
``inspect.signature`` does), once per class, and then run as fast as dataclasses' own; the frozen
``__setattr__``/``__delattr__``, which run only to raise, are shared functions.

The options this module does not implement itself (``order``, ``unsafe_hash``, ``kw_only``, ``init=False``,
``repr=False``, ``eq=False``, an ``InitVar`` or ``KW_ONLY`` field) fall back to :func:`dataclasses.dataclass`.
A mistake in a declaration (a field without a default after one with a default, a mutable default, a frozen class
defining ``__setattr__``) raises the error ``dataclasses`` raises, when the class is declared.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["compile_pending_inits", "dataclass", "pending_inits"]

_T = TypeVar("_T")


@dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)
class _Template:
    """Where this module reads what :func:`dataclasses.fields` looks for (a regular field's marker) and the type of
    ``__dataclass_params__``; declaring it compiles nothing."""

    x: int


_FIELD_MARKER = _Template.__dataclass_fields__["x"]._field_type  # type: ignore[attr-defined]
_PARAMS = _Template.__dataclass_params__  # type: ignore[attr-defined]
_MISSING: Any = dataclasses.MISSING


class _Factory:
    """The parameter default of a field with a ``default_factory`` (shown as dataclasses shows its own)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
_OWN_NAMES = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


@overload
def dataclass(cls: type[_T], /) -> type[_T]: ...


@overload
def dataclass(
    cls: None = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(
    cls: type[_T] | None = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Any:
    """:func:`dataclasses.dataclass`, with the same arguments and the same class made (see the module)."""

    def wrap(c: type[_T]) -> type[_T]:
        if order or unsafe_hash or kw_only or not (init and repr and eq) or _needs_dataclasses(c):
            return dataclasses.dataclass(
                c,
                init=init,
                repr=repr,
                eq=eq,
                order=order,
                unsafe_hash=unsafe_hash,
                frozen=frozen,
                match_args=match_args,
                kw_only=kw_only,
                slots=slots,
            )
        return _process(c, frozen=frozen, match_args=match_args, slots=slots)

    return wrap if cls is None else wrap(cls)


def _needs_dataclasses(cls: type) -> bool:
    """Whether ``cls`` declares a field form this module leaves to :mod:`dataclasses` (``InitVar``, ``KW_ONLY``)."""
    for annotation in cls.__dict__.get("__annotations__", {}).values():
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
        if "InitVar" in text or "KW_ONLY" in text or isinstance(annotation, dataclasses.InitVar):
            return True
    return False


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        head = annotation.split("[", 1)[0].strip()
        return head in ("ClassVar", "typing.ClassVar", "t.ClassVar")
    return annotation is typing.ClassVar or getattr(annotation, "__origin__", None) is typing.ClassVar


def _process(cls: type[_T], *, frozen: bool, match_args: bool, slots: bool) -> type[_T]:
    fields = _fields(cls, frozen)
    params = copy.copy(_PARAMS)
    settings = {"init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": False, "frozen": frozen}
    settings |= {"match_args": match_args, "kw_only": False, "slots": slots}  # recorded from Python 3.12 on
    for key, value in settings.items():
        if hasattr(params, key):
            setattr(params, key, value)
    class_hash = cls.__dict__.get("__hash__", _MISSING)
    explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in cls.__dict__))
    defined = {name for name in _OWN_NAMES if name in cls.__dict__}
    if slots:
        cls = _with_slots(cls, tuple(fields))
    every = tuple(fields.values())
    attributes: dict[str, Any] = {"__dataclass_fields__": fields, "__dataclass_params__": params}
    if match_args and "__match_args__" not in cls.__dict__:
        attributes["__match_args__"] = tuple(f.name for f in every if f.init)
    if "__init__" not in defined:
        attributes["__init__"] = _Lazy(cls, "__init__", lambda: _init_source(cls, every, frozen))
    if "__repr__" not in defined:
        attributes["__repr__"] = _Lazy(cls, "__repr__", lambda: _repr_source(tuple(f.name for f in every if f.repr)))
    if "__eq__" not in defined:
        attributes["__eq__"] = _Lazy(cls, "__eq__", lambda: _eq_source(tuple(f.name for f in every if f.compare)))
    if not explicit_hash:
        hashed = tuple(f.name for f in every if (f.compare if f.hash is None else f.hash))
        attributes["__hash__"] = _Lazy(cls, "__hash__", lambda: _hash_source(hashed)) if frozen else None
    if frozen:
        attributes["__setattr__"] = _frozen_setattr(cls, frozenset(fields))
        attributes["__delattr__"] = _frozen_delattr(cls, frozenset(fields))
        if slots and "__getstate__" not in cls.__dict__:
            attributes |= {"__getstate__": _getstate, "__setstate__": _setstate}
    if not getattr(cls, "__doc__", None):
        attributes["__doc__"] = cls.__name__ + "(" + ", ".join(_doc_param(f) for f in every if f.init) + ")"
    for name, value in attributes.items():
        setattr(cls, name, value)
    return cls


def _fields(cls: type, frozen: bool) -> dict[str, dataclasses.Field[Any]]:
    """``cls``'s fields, its bases' first, as dataclasses collects them (a ``Field`` class attribute replaced by its
    default); the errors dataclasses raises for a bad declaration."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    frozen_bases = []
    for base in cls.__mro__[-1:0:-1]:
        base_fields = base.__dict__.get("__dataclass_fields__")
        if base_fields is not None:
            fields.update((f.name, f) for f in base_fields.values() if f._field_type is _FIELD_MARKER)
            frozen_bases.append(getattr(base, "__dataclass_params__").frozen)  # noqa: B009 (typed as type)
    if frozen_bases and any(frozen_bases) and not frozen:
        raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
    if frozen_bases and not any(frozen_bases) and frozen:
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if not _is_classvar(annotation):
            fields[name] = _field(cls, name, annotation)
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in fields:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    seen_default = False
    for f in fields.values():
        if f.init and f.default is _MISSING and f.default_factory is _MISSING and seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or (f.init and (f.default is not _MISSING or f.default_factory is not _MISSING))
    if frozen and ("__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__):
        name = "__setattr__" if "__setattr__" in cls.__dict__ else "__delattr__"
        raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    return fields


def _field(cls: type, name: str, annotation: Any) -> dataclasses.Field[Any]:
    """The field ``name`` of ``cls`` (annotated ``annotation``), its class attribute set to its default (or gone)."""
    default = cls.__dict__.get(name, _MISSING)
    if isinstance(default, dataclasses.Field):
        f = default
        if f.default is _MISSING:
            delattr(cls, name)
        else:
            setattr(cls, name, f.default)
    else:
        f = dataclasses.field(default=default)
    if f.default is not _MISSING and f.default.__class__.__hash__ is None:
        raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
    f.name = name
    f.type = annotation
    f._field_type = _FIELD_MARKER  # type: ignore[attr-defined]
    if f.kw_only is _MISSING:
        f.kw_only = False
    return f


def _with_slots(cls: type[_T], names: tuple[str, ...]) -> type[_T]:
    """``cls`` made again with ``__slots__`` for its fields not slotted in a base (as ``dataclass(slots=True)``)."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    inherited: set[str] = set()
    for base in cls.__mro__[1:-1]:
        found = base.__dict__.get("__slots__")
        if found is not None:
            inherited.update((found,) if isinstance(found, str) else found)
    body = dict(cls.__dict__)
    body["__slots__"] = tuple(n for n in names if n not in inherited)
    for name in names:
        body.pop(name, None)
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    qualname = getattr(cls, "__qualname__", None)
    meta: Any = type(cls)
    new: type[_T] = meta(cls.__name__, cls.__bases__, body)
    if qualname is not None:
        new.__qualname__ = qualname
    return new


def _doc_param(f: dataclasses.Field[Any]) -> str:
    """One parameter as ``inspect.signature`` shows it in the ``__doc__`` dataclasses writes for a class without one."""
    text = f"{f.name}: {f.type!r}" if isinstance(f.type, str) else f"{f.name}: {getattr(f.type, '__name__', f.type)}"
    if f.default is not _MISSING:
        return f"{text} = {f.default!r}"
    return f"{text} = <factory>" if f.default_factory is not _MISSING else text


def _frozen_setattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


class _Lazy:
    """One of a class's methods (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``) until first looked up: then
    compiled from the source dataclasses writes for it, put on the class in its place, and returned (bound to the
    instance at hand). Looked up means called through the class's slot (``cls(...)``, ``==``, ``hash``, ``repr``)
    or read (``cls.__init__``, ``inspect.signature``)."""

    __slots__ = ("cls", "name", "source")

    def __init__(self, cls: type, name: str, source: Callable[[], tuple[str, dict[str, Any]]]) -> None:
        self.cls, self.name, self.source = cls, name, source

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        method = self.cls.__dict__.get(self.name)
        if method is self:
            text, names = self.source()
            namespace: dict[str, Any] = {}
            exec(text, names, namespace)  # noqa: S102 (the text is made here from the field names)
            method = namespace[self.name]
            method.__qualname__ = f"{self.cls.__qualname__}.{self.name}"
            method.__module__ = self.cls.__module__
            if self.name == "__init__":  # the annotations dataclasses gives it (inspect.signature shows them)
                fields = getattr(self.cls, "__dataclass_fields__").values()  # noqa: B009 (typed as type)
                method.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
            type.__setattr__(self.cls, self.name, method)
        return method if obj is None else method.__get__(obj, owner)  # type: ignore[union-attr]


def _tuple(obj: str, names: tuple[str, ...]) -> str:
    return "(" + "".join(f"{obj}.{name}," for name in names) + ")"


def _eq_source(names: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    return (
        "def __eq__(self, other):\n"
        "    if other.__class__ is self.__class__:\n"
        f"        return {_tuple('self', names)} == {_tuple('other', names)}\n"
        "    return NotImplemented\n",
        {},
    )


def _hash_source(names: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    return f"def __hash__(self):\n    return hash({_tuple('self', names)})\n", {}


_REPR_RUNNING: set[tuple[int, int]] = set()  # (instance, thread) whose repr is being made: a cycle shows as ...


def _repr_source(names: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    from _thread import get_ident

    inner = ", ".join(f"{name}={{self.{name}!r}}" for name in names)
    return (
        "def __repr__(self):\n"
        "    key = (id(self), __get_ident())\n"
        "    if key in __running:\n"
        "        return '...'\n"
        "    __running.add(key)\n"
        "    try:\n"
        f'        return self.__class__.__qualname__ + f"({inner})"\n'
        "    finally:\n"
        "        __running.discard(key)\n",
        {"__get_ident": get_ident, "__running": _REPR_RUNNING},
    )


def _init_source(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> tuple[str, dict[str, Any]]:
    names: dict[str, Any] = {"__object_setattr": object.__setattr__, "__factory": _FACTORY}
    params, body = ["self"], []
    for f in fields:
        if f.init:
            if f.default is not _MISSING:
                names[f"__default_{f.name}"] = f.default
                params.append(f"{f.name}=__default_{f.name}")
                value = f.name
            elif f.default_factory is not _MISSING:
                names[f"__factory_{f.name}"] = f.default_factory
                params.append(f"{f.name}=__factory")
                value = f"__factory_{f.name}() if {f.name} is __factory else {f.name}"
            else:
                params.append(f.name)
                value = f.name
        elif f.default is not _MISSING:
            names[f"__default_{f.name}"] = f.default
            value = f"__default_{f.name}"
        elif f.default_factory is not _MISSING:
            names[f"__factory_{f.name}"] = f.default_factory
            value = f"__factory_{f.name}()"
        else:
            continue
        body.append(f"__object_setattr(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__({', '.join(params)}) -> None:\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    return source, names


def pending_inits(namespace: Mapping[str, object], module: str) -> list[str]:
    """The names in ``namespace`` (``module``'s ``vars``) of the classes :func:`dataclass` made in ``module`` whose
    ``__init__`` is not compiled yet (it is at the first construction)."""
    return [
        name
        for name, value in list(namespace.items())
        if isinstance(value, type) and value.__module__ == module and isinstance(vars(value).get("__init__"), _Lazy)
    ]


def compile_pending_inits(namespace: Mapping[str, object], module: str) -> int:
    """Compile now the ``__init__`` of each class of :func:`pending_inits` (``__repr__``, ``__eq__`` and
    ``__hash__`` stay to their first use). Returns how many were compiled."""
    names = pending_inits(namespace, module)
    for name in names:
        getattr(namespace[name], "__init__")  # noqa: B009 - the first lookup compiles it
    return len(names)
