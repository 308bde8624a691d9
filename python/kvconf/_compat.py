"""Keyword names the documented API had before a rename, still taken for a while with a DeprecationWarning."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


def set_alias(fn: F) -> F:
    """fn(case_set=...) also called as fn(set=...), the name docs/PYTHON.md gave it before (it shadowed the builtin
    set): the value is passed on as case_set, with a DeprecationWarning naming the new keyword."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if "set" in kwargs:
            if args or "case_set" in kwargs:
                raise TypeError(f"{fn.__name__}: set= is case_set= (deprecated): give it once")
            warnings.warn(f"{fn.__name__}(set=...) is deprecated: use {fn.__name__}(case_set=...)",
                          DeprecationWarning, stacklevel=2)
            kwargs["case_set"] = kwargs.pop("set")
        return fn(*args, **kwargs)

    return cast(F, call)
