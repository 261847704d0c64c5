"""Every public name has a docstring (issue 24): the classes and functions that a module of
dpkit exports in ``__all__`` and defines itself. The assertion lists the ones that have
none."""

import importlib
import inspect
import pkgutil

import dpkit


def public_names():
    for info in pkgutil.walk_packages(dpkit.__path__, "dpkit."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is missing: its names are not public here
            continue
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and \
                    getattr(obj, "__module__", "") == info.name:
                yield f"{info.name}.{attr}", obj


def test_every_public_name_has_a_docstring():
    names = dict(public_names())
    assert len(names) > 400
    undocumented = sorted(n for n, obj in names.items() if not (obj.__doc__ or "").strip())
    assert undocumented == [], "public names without a docstring:\n" + "\n".join(undocumented)
